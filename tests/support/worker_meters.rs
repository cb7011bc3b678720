//! What the benchmarks read of a `nodewright-worker` process of their own: its apiserver
//! requests, from its log (kube-client logs each request at debug level, inside its `HTTP` span
//! with `http.method` and `http.url`: run the worker with `RUST_LOG=info,kube_client=debug` and
//! `NODEWRIGHT_LOG_FORMAT=json`), its CPU time (`/proc/<pid>/stat`) and its resident memory
//! (`/proc/<pid>/status`).

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// Fails unless `log` (the worker's, after its start) shows at least one apiserver request (its
/// start checks the cluster identity): without, the worker's own apiserver figures would read
/// zero whatever it does (a kube-client that logs its requests differently).
pub fn ensure_requests_logged(log: &str) -> Result<()> {
    if apiserver_requests(log).is_empty() {
        bail!(
            "the worker's log shows none of its apiserver requests (kube-client's debug line \
             \"requesting\" with http.method and http.url), so they cannot be counted; the log \
             starts:\n{}",
            log.lines().take(10).collect::<Vec<_>>().join("\n")
        );
    }
    Ok(())
}

/// The worker's apiserver requests in `log` (its JSON lines): kube-client's debug event
/// `requesting`, inside its `HTTP` span with `http.method` and `http.url`; counted by
/// `VERB resource` (`WATCH nodes`, `LIST pods`, `POST pods/eviction`).
pub fn apiserver_requests(log: &str) -> BTreeMap<String, f64> {
    let mut counts = BTreeMap::new();
    for line in log.lines().filter(|line| line.contains("\"requesting\"")) {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let span = &event["span"];
        let (Some(method), Some(url)) = (span["http.method"].as_str(), span["http.url"].as_str())
        else {
            continue;
        };
        *counts.entry(classify(method, url)).or_default() += 1.0;
    }
    counts
}

/// `GET /api/v1/nodes?watch=true&…` → `WATCH nodes`; a GET of a collection is a LIST.
fn classify(method: &str, url: &str) -> String {
    let path_and_query = url.split_once("://").map_or(url, |(_, rest)| {
        rest.find('/').map_or("/", |slash| &rest[slash..])
    });
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/<resource>[/<name>] or /apis/<group>/<version>[/namespaces/<ns>]/<resource>[/<name>]
    let rest: &[&str] = match segments.first() {
        Some(&"api") => segments.get(2..).unwrap_or_default(),
        Some(&"apis") => segments.get(3..).unwrap_or_default(),
        _ => &[],
    };
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let (resource, named) = match rest {
        [] => (path.to_owned(), false),
        [resource] => ((*resource).to_owned(), false),
        [resource, _name, sub @ ..] => {
            let resource = if sub.is_empty() {
                (*resource).to_owned()
            } else {
                format!("{resource}/{}", sub.join("/"))
            };
            (resource, true)
        }
    };
    let watch = query.split('&').any(|pair| pair == "watch=true");
    let verb = match method {
        "GET" if watch => "WATCH",
        "GET" if named => "GET",
        "GET" => "LIST",
        other => other,
    };
    format!("{verb} {resource}")
}

/// utime + stime of process `pid`, in seconds.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (has the worker exited?)"))?;
    // Fields after the command's closing parenthesis start at field 3 (state); utime and
    // stime are fields 14 and 15.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("no ')' in /proc/<pid>/stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |index: usize| -> Result<f64> {
        fields
            .get(index)
            .and_then(|field| field.parse::<f64>().ok())
            .with_context(|| format!("field {} of /proc/{pid}/stat", index + 3))
    };
    Ok((tick(11)? + tick(12)?) / clock_ticks_per_second())
}

/// The resident memory of process `pid` (`VmRSS` of `/proc/<pid>/status`), in bytes.
pub fn rss_bytes(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status (has the worker exited?)"))?;
    vm_rss(&status).with_context(|| format!("no VmRSS line in /proc/{pid}/status"))
}

/// `VmRSS: 12345 kB` → 12345 × 1024.
fn vm_rss(status: &str) -> Option<u64> {
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// `getconf CLK_TCK`, 100 when it cannot be read (Linux's USER_HZ everywhere).
fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_named_by_verb_and_resource() {
        let base = "https://127.0.0.1:6443";
        for (method, path, expected) in [
            (
                "GET",
                "/api/v1/nodes?watch=true&fieldSelector=x",
                "WATCH nodes",
            ),
            ("GET", "/api/v1/nodes/web-bcdfg", "GET nodes"),
            (
                "GET",
                "/api/v1/namespaces/ns/pods?fieldSelector=x",
                "LIST pods",
            ),
            (
                "POST",
                "/api/v1/namespaces/ns/pods/web-1/eviction",
                "POST pods/eviction",
            ),
            (
                "GET",
                "/apis/policy/v1/namespaces/ns/poddisruptionbudgets",
                "LIST poddisruptionbudgets",
            ),
            (
                "PATCH",
                "/api/v1/nodes/web-bcdfg/status",
                "PATCH nodes/status",
            ),
        ] {
            assert_eq!(
                classify(method, &format!("{base}{path}")),
                expected,
                "{path}"
            );
        }
    }

    #[test]
    fn logged_requests_are_counted_from_the_json_lines() {
        let line = |method: &str, url: &str| {
            serde_json::json!({
                "fields": { "message": "requesting" },
                "span": { "http.method": method, "http.url": url, "name": "HTTP" },
            })
            .to_string()
        };
        let log = [
            line("GET", "https://h/api/v1/nodes/a"),
            line("GET", "https://h/api/v1/nodes/b"),
            "not json \"requesting\"".to_owned(),
            line("POST", "https://h/api/v1/namespaces/n/pods/p/eviction"),
        ]
        .join("\n");
        let counts = apiserver_requests(&log);
        assert_eq!(counts.get("GET nodes"), Some(&2.0));
        assert_eq!(counts.get("POST pods/eviction"), Some(&1.0));
        assert_eq!(counts.len(), 2);
    }

    #[test]
    fn the_resident_memory_is_read_in_bytes() {
        let status = "Name:\tnodewright-work\nVmPeak:\t  900 kB\nVmRSS:\t   12345 kB\n";
        assert_eq!(vm_rss(status), Some(12345 * 1024));
        assert_eq!(vm_rss("Name:\tx\n"), None);
    }
}
