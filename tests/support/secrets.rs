//! Looking for a secret where it must never be: in a run's history (its payloads are base64 JSON,
//! so every string is searched as written and decoded), a log or a CLI's output.

use base64::Engine;
use serde_json::Value;

/// Where `needle` occurs in `value`: the JSON path of each string that holds it, as written or
/// base64-decoded (how Temporal's JSON carries payload data).
pub fn json_mentions(value: &Value, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    walk(value, "$", needle, &mut found);
    found
}

fn walk(value: &Value, path: &str, needle: &str, found: &mut Vec<String>) {
    match value {
        Value::String(text) => {
            if text.contains(needle) || decoded(text).is_some_and(|d| d.contains(needle)) {
                found.push(path.to_owned());
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                walk(item, &format!("{path}[{index}]"), needle, found);
            }
        }
        Value::Object(fields) => {
            for (name, field) in fields {
                walk(field, &format!("{path}.{name}"), needle, found);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// `text` base64-decoded, as lossy UTF-8, when it is base64.
fn decoded(text: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_needle_is_found_as_written_and_inside_base64_payload_data() {
        let secret = "abcdef.0123456789abcdef";
        let data = base64::engine::general_purpose::STANDARD.encode(format!(
            r#"{{"bootstrap":"kubeadm join --token {secret}"}}"#
        ));
        let history = json!({
            "events": [
                { "input": { "payloads": [{ "metadata": { "encoding": "anNvbi9wbGFpbg==" }, "data": data }] } },
                { "failure": { "message": format!("failed near {secret}") } },
                { "result": { "payloads": [{ "data": "eyJvayI6dHJ1ZX0=" }] } },
            ]
        });
        assert_eq!(
            json_mentions(&history, secret),
            [
                "$.events[0].input.payloads[0].data",
                "$.events[1].failure.message"
            ]
        );
        assert!(json_mentions(&history, "not-there").is_empty());
    }
}
