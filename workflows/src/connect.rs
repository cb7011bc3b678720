//! Connecting to Temporal, shared by the worker, the CLI and the tests.

use std::str::FromStr;

use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions};
use url::Url;

/// Where the Temporal frontend is and how to talk to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemporalSettings {
    /// `host:port` (the `TEMPORAL_ADDRESS` convention) or a full URL.
    pub address: String,
    /// The Temporal namespace.
    pub namespace: String,
    /// An API key; when set, the connection uses TLS.
    pub api_key: Option<String>,
    /// The identity the server records for this client or worker.
    pub identity: String,
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The address is not `host:port` or a URL.
    #[error(
        "Temporal address {address:?} is not host:port or a URL; set TEMPORAL_ADDRESS, e.g. 127.0.0.1:7233"
    )]
    InvalidAddress {
        /// The address as configured.
        address: String,
        /// Why it does not parse.
        #[source]
        source: url::ParseError,
    },
    /// The server did not answer.
    #[error("could not reach Temporal at {address}; is the server running (dev/stack status)?")]
    Unreachable {
        /// The address tried.
        address: String,
        /// The transport error.
        #[source]
        source: temporalio_client::errors::ClientConnectError,
    },
    /// The client could not be built over the connection.
    #[error("could not create a Temporal client for namespace {namespace:?}")]
    Client {
        /// The namespace.
        namespace: String,
        /// The cause.
        #[source]
        source: temporalio_client::errors::ClientNewError,
    },
}

impl TemporalSettings {
    /// The frontend URL: `address` with `http://` (or `https://` with an API key) when it has no
    /// scheme.
    pub fn url(&self) -> Result<Url, ConnectError> {
        let with_scheme = if self.address.contains("://") {
            self.address.clone()
        } else if self.api_key.is_some() {
            format!("https://{}", self.address)
        } else {
            format!("http://{}", self.address)
        };
        Url::from_str(&with_scheme).map_err(|source| ConnectError::InvalidAddress {
            address: self.address.clone(),
            source,
        })
    }

    /// Connects and returns a client for the namespace.
    pub async fn connect(&self) -> Result<Client, ConnectError> {
        let options = ConnectionOptions::new(self.url()?)
            .identity(self.identity.clone())
            .maybe_api_key(self.api_key.clone())
            .build();
        let connection =
            Connection::connect(options)
                .await
                .map_err(|source| ConnectError::Unreachable {
                    address: self.address.clone(),
                    source,
                })?;
        Client::new(
            connection,
            ClientOptions::new(self.namespace.clone()).build(),
        )
        .map_err(|source| ConnectError::Client {
            namespace: self.namespace.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(address: &str, api_key: Option<&str>) -> TemporalSettings {
        TemporalSettings {
            address: address.to_owned(),
            namespace: "default".to_owned(),
            api_key: api_key.map(str::to_owned),
            identity: "test".to_owned(),
        }
    }

    #[test]
    fn addresses_get_a_scheme_matching_their_security() {
        let table = [
            ("127.0.0.1:7233", None, "http://127.0.0.1:7233/"),
            (
                "ns.tmprl.cloud:7233",
                Some("key"),
                "https://ns.tmprl.cloud:7233/",
            ),
            (
                "https://temporal.example:7233",
                None,
                "https://temporal.example:7233/",
            ),
        ];
        for (address, key, expected) in table {
            let url = settings(address, key).url().expect("valid address");
            assert_eq!(url.as_str(), expected, "{address}");
        }
    }

    #[test]
    fn a_bad_address_names_the_variable_to_fix() {
        let err = settings("http://[::1", None).url().expect_err("invalid");
        assert!(err.to_string().contains("TEMPORAL_ADDRESS"), "{err}");
    }
}
