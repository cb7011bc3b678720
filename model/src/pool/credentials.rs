//! Does an inline bootstrap text look like it holds a credential? An inline `bootstrap` travels
//! with the pool through every run's input, so Temporal keeps it in plain text in each history
//! (unless a payload codec encrypts them); a join script usually carries a bootstrap token, a
//! kubeconfig or a key. The CLI warns (it does not refuse: a script may hold a look-alike), and
//! names what it found, never the text itself.

/// What a bootstrap text seems to hold, one description per kind found, in a fixed order; empty
/// when nothing looks like a credential.
pub fn credential_hints(text: &str) -> Vec<&'static str> {
    let mut found = Vec::new();
    if has_bootstrap_token(text) {
        found.push("a Kubernetes bootstrap token (<6 characters>.<16 characters>)");
    }
    if text.lines().any(is_token_line) {
        found.push("a kubeconfig `token:` entry");
    }
    if text.contains("client-key-data:") {
        found.push("a kubeconfig `client-key-data:` entry");
    }
    if text.contains("-----BEGIN") && text.contains("PRIVATE KEY-----") {
        found.push("a private key block");
    }
    if text.contains("AccountKey=") || text.contains("SharedAccessKey=") {
        found.push("an Azure storage or service bus key");
    }
    found
}

/// `token: <value>` (a kubeconfig user's bearer token), not an empty or templated value.
fn is_token_line(line: &str) -> bool {
    let line = line.trim_start().trim_start_matches("- ");
    line.strip_prefix("token:").is_some_and(|value| {
        let value = value.trim().trim_matches(['"', '\'']);
        !value.is_empty() && !value.starts_with("${") && !value.starts_with("<<")
    })
}

/// `[a-z0-9]{6}\.[a-z0-9]{16}` standing alone (not inside a longer run of such characters): the
/// form of `kubeadm join --token`.
fn has_bootstrap_token(text: &str) -> bool {
    let bytes = text.as_bytes();
    let token_char = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    bytes.iter().enumerate().any(|(dot, &b)| {
        if b != b'.' || dot < 6 {
            return false;
        }
        let (id, rest) = (&bytes[dot - 6..dot], &bytes[dot + 1..]);
        let Some(secret) = rest.get(..16) else {
            return false;
        };
        let before = dot.checked_sub(7).and_then(|i| bytes.get(i));
        let after = rest.get(16);
        id.iter().all(|&b| token_char(b))
            && secret.iter().all(|&b| token_char(b))
            && !before.is_some_and(|&b| b.is_ascii_alphanumeric())
            && !after.is_some_and(|&b| b.is_ascii_alphanumeric())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_scripts_with_credentials_are_recognised_and_plain_ones_are_not() {
        let cases: [(&str, &[&str]); 9] = [
            ("#!/bin/bash\napt-get install -y kubelet\n", &[]),
            (
                "kubeadm join 10.0.0.4:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash sha256:1234",
                &["a Kubernetes bootstrap token (<6 characters>.<16 characters>)"],
            ),
            // A version or a host name is not a token.
            (
                "image: registry.k8s.io/pause:3.10 host node01.example.com\n",
                &[],
            ),
            ("x-abcdef.0123456789abcdef0", &[]),
            (
                "users:\n- name: kubelet\n  user:\n    token: eyJhbGciOi\n",
                &["a kubeconfig `token:` entry"],
            ),
            (
                "token: ${BOOTSTRAP_TOKEN}\ntoken: <<BOOTSTRAP_TOKEN>>\ntoken: \"\"\n",
                &[],
            ),
            (
                "    client-key-data: LS0tLS1CRUdJTi\n",
                &["a kubeconfig `client-key-data:` entry"],
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n",
                &["a private key block"],
            ),
            (
                "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc==",
                &["an Azure storage or service bus key"],
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(credential_hints(text), expected, "{text:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_read_without_a_panic(text in ".*") {
            let _ = credential_hints(&text);
        }
    }

    #[test]
    fn a_token_at_either_end_of_the_text_is_found() {
        assert_eq!(credential_hints("abcdef.0123456789abcdef").len(), 1);
        assert_eq!(credential_hints("abcdef.0123456789abcde").len(), 0);
    }
}
