//! Reading a worker's `/metrics` (Prometheus text format) in tests: every sample with its
//! labels, and sums over the samples a selector matches.

use std::net::SocketAddr;

use anyhow::{Context, Result, ensure};

use crate::worker_process::http_get;

/// One sample: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' name (`…_bucket`, `…_count` for a histogram's parts).
    pub name: String,
    /// Its labels, in the order written.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

/// A scrape's samples.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// Every sample, in order.
    pub samples: Vec<Sample>,
    /// The text scraped.
    pub text: String,
}

impl Samples {
    /// The sum of the samples of `name` that carry every label of `selector` (0 when none).
    pub fn sum(&self, name: &str, selector: &[(&str, &str)]) -> f64 {
        self.matching(name, selector).map(|s| s.value).sum()
    }

    /// Whether any sample of `name` carries every label of `selector`.
    pub fn has(&self, name: &str, selector: &[(&str, &str)]) -> bool {
        self.matching(name, selector).next().is_some()
    }

    fn matching<'a>(
        &'a self,
        name: &'a str,
        selector: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |sample| {
            sample.name == name
                && selector.iter().all(|(label, value)| {
                    sample.labels.iter().any(|(l, v)| l == label && v == value)
                })
        })
    }
}

/// GETs `/metrics` from `address` and parses it.
pub fn scrape(address: SocketAddr) -> Result<Samples> {
    let (status, body) = http_get(address, "/metrics")?;
    ensure!(status == 200, "GET /metrics answered {status}: {body}");
    parse(&body)
}

/// Scrapes `address` until `holds` says yes (the pool and rollout gauges are read every 30 s),
/// or fails after `timeout` naming `what` and showing the last scrape.
pub async fn scrape_until(
    address: SocketAddr,
    what: &str,
    timeout: std::time::Duration,
    holds: impl Fn(&Samples) -> bool,
) -> Result<Samples> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let samples = scrape(address)?;
        if holds(&samples) {
            return Ok(samples);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "timed out after {timeout:?} waiting for {what} in /metrics:\n{}",
                samples.text
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Parses the text format (comments skipped; label values unescaped for `\"` and `\\`).
pub fn parse(text: &str) -> Result<Samples> {
    let mut samples = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        samples.push(parse_line(line).with_context(|| format!("metrics line {line:?}"))?);
    }
    Ok(Samples {
        samples,
        text: text.to_owned(),
    })
}

fn parse_line(line: &str) -> Result<Sample> {
    let (series, value) = match line.find('{') {
        Some(_) => {
            let close = line.rfind('}').context("an unclosed {")?;
            (&line[..=close], line[close + 1..].trim())
        }
        None => line.split_once(' ').context("no value")?,
    };
    let value = value
        .split_whitespace()
        .next()
        .context("no value")?
        .parse::<f64>()?;
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, parse_labels(rest.trim_end_matches('}'))?),
        None => (series, Vec::new()),
    };
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

fn parse_labels(text: &str) -> Result<Vec<(String, String)>> {
    let mut labels = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (name, after) = rest.split_once("=\"").context("a label without =\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = None;
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(if escaped == 'n' { '\n' } else { escaped });
                    }
                }
                '"' => {
                    end = Some(at);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = end.context("an unclosed label value")?;
        labels.push((name.trim_start_matches(',').trim().to_owned(), value));
        rest = after[end + 1..].trim_start_matches(',');
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_read_with_their_labels_and_summed_by_selector() {
        let samples = parse(
            "# HELP x y\n# TYPE a counter\na_total{code=\"200\",op=\"v.put\"} 2\na_total{code=\"429\",op=\"v.put\"} 1\nb 3.5\nc{l=\"q\\\"x,y\"} 1\n",
        )
        .expect("parses");
        assert_eq!(samples.sum("a_total", &[("op", "v.put")]), 3.0);
        assert_eq!(samples.sum("a_total", &[("code", "429")]), 1.0);
        assert_eq!(samples.sum("b", &[]), 3.5);
        assert!(samples.has("c", &[("l", "q\"x,y")]));
        assert!(!samples.has("a_total", &[("code", "500")]));
    }
}
