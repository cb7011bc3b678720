//! Reading a pool file's YAML into [`Pool`]: syntax, field names and types only.
//!
//! Values are checked afterwards by [`super::validate()`], which reports every problem at once;
//! the parser stops at the first thing it cannot read and says where it is.

use super::spec::Pool;

/// A pool file that is not YAML shaped like a [`Pool`]: bad syntax, an unknown or missing field,
/// or a value of the wrong type. Never retryable: the file has to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the pool file cannot be read: {message}; compare the field names and types with examples/pools/workers.yaml"
)]
pub struct PoolFileError {
    /// The 1-based line of the problem, when the parser knows it.
    pub line: Option<u64>,
    /// The 1-based column of the problem, when the parser knows it.
    pub column: Option<u64>,
    /// The parser's message with its position, e.g.
    /// ``unknown field `vmsize`, expected one of … at line 7, column 5``.
    pub message: String,
    /// The same message followed by the lines around the problem, with a caret under it: what a
    /// terminal should show.
    pub rendered: String,
}

/// Parses `text` (one YAML document) as a pool file.
///
/// # Errors
///
/// [`PoolFileError`] when the text is not YAML, holds more than one document, has a field the
/// [`Pool`] shape does not know, lacks a required one, or has a value of the wrong type.
pub fn parse(text: &str) -> Result<Pool, PoolFileError> {
    serde_saphyr::from_str(text).map_err(|error| {
        let location = error.location();
        PoolFileError {
            line: location.map(|l| l.line()),
            column: location.map(|l| l.column()),
            message: error.without_snippet().to_string(),
            rendered: error.to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "\
apiVersion: nodewright.io/v1alpha1
kind: Pool
metadata:
  name: workers
spec:
  replicas: 2
  template:
    vmSize: Standard_D2s_v5
    image:
      publisher: Canonical
      offer: ubuntu-24_04-lts
      sku: server
      version: latest
    subnetId: /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s
";

    fn parse_err(text: &str) -> PoolFileError {
        match parse(text) {
            Ok(pool) => panic!("parsed {pool:?}"),
            Err(err) => err,
        }
    }

    #[test]
    fn parses_a_minimal_file_and_fills_the_defaults() {
        let pool = parse(MINIMAL).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(pool.metadata.name, "workers");
        assert_eq!(pool.spec.replicas, 2);
        assert_eq!(pool.spec.template.admin_username, "nodewright");
        assert_eq!(
            pool.spec.template.os_disk.storage_account_type,
            "Premium_LRS"
        );
        assert_eq!(pool.spec.strategy, crate::pool::Strategy::default());
        assert_eq!(pool.spec.drain, crate::pool::DrainSettings::default());
        assert_eq!(pool.spec.timeouts, crate::pool::Timeouts::default());
    }

    #[test]
    fn names_an_unknown_field_with_its_line_and_column() {
        let text = MINIMAL.replace("    vmSize:", "    vmsize:");
        let err = parse_err(&text);
        assert_eq!((err.line, err.column), (Some(8), Some(5)));
        assert!(err.message.contains("unknown field `vmsize`"), "{err}");
        assert!(err.message.contains("line 8, column 5"), "{err}");
        assert!(
            err.to_string().contains("examples/pools/workers.yaml"),
            "{err}"
        );
        assert!(err.rendered.contains('^'), "{}", err.rendered);
    }

    #[test]
    fn names_a_missing_field() {
        let text = MINIMAL.replace("  replicas: 2\n", "");
        let err = parse_err(&text);
        assert!(err.message.contains("missing field `replicas`"), "{err}");
        assert!(err.line.is_some(), "{err:?}");
    }

    #[test]
    fn refuses_a_value_of_the_wrong_type() {
        let err = parse_err(&MINIMAL.replace("replicas: 2", "replicas: -2"));
        assert!(err.message.contains("line 6"), "{err}");
    }

    #[test]
    fn reads_counts_and_percentages_and_explains_anything_else() {
        let with = |surge: &str| {
            MINIMAL.replace(
                "  replicas: 2\n",
                &format!("  replicas: 2\n  strategy:\n    maxSurge: {surge}\n"),
            )
        };
        for (written, expected) in [
            ("1", crate::pool::IntOrPercent::Count(1)),
            ("-1", crate::pool::IntOrPercent::Count(-1)),
            ("25%", crate::pool::IntOrPercent::Text("25%".to_owned())),
            ("'3'", crate::pool::IntOrPercent::Text("3".to_owned())),
        ] {
            let pool = parse(&with(written)).unwrap_or_else(|err| panic!("{written}: {err}"));
            assert_eq!(pool.spec.strategy.max_surge, expected, "{written}");
        }
        let err = parse_err(&with("true"));
        assert!(err.message.contains("\"25%\""), "{err}");
    }

    #[test]
    fn refuses_empty_text_and_several_documents() {
        assert!(parse_err("").line.is_some());
        let err = parse_err(&format!("{MINIMAL}---\n{MINIMAL}"));
        assert!(err.message.contains("multiple"), "{err}");
    }
}
