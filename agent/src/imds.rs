//! The VM's Instance Metadata Service: the Scheduled Events document and its acknowledgement.
//!
//! Plain HTTP to a link-local address (no TLS, as Azure serves it), the header `Metadata: true`
//! IMDS requires, a short timeout (a poll that hangs must not hold up the next), and never a
//! proxy: IMDS answers only requests that come straight from the VM.

use std::time::Duration;

use nodewright_model::scheduled_events::{MAX_DOCUMENT_BYTES, ScheduledEvents, parse};
use serde_json::json;
use url::Url;

use crate::error::{Error, Result};

/// Azure's metadata service, as every VM reaches it.
pub const DEFAULT_IMDS_URL: &str = "http://169.254.169.254";

/// The API version asked for: the newest the Scheduled Events documentation describes.
pub const API_VERSION: &str = "2020-07-01";

/// How long one request may take, connecting included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The most of an error answer's body kept for the log.
const ERROR_BODY_BYTES: usize = 256;

/// A client of one VM's Scheduled Events endpoint.
#[derive(Debug, Clone)]
pub struct Imds {
    http: reqwest::Client,
    url: Url,
}

impl Imds {
    /// A client of the service at `base` (`http://169.254.169.254`, or a VM's base in the
    /// sandbox): its document is `<base>/metadata/scheduledevents?api-version=2020-07-01`.
    ///
    /// # Errors
    ///
    /// [`Error::BuildHttpClient`] when reqwest cannot build its client.
    pub fn new(base: &Url) -> Result<Self> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(Error::BuildHttpClient)?;
        Ok(Self {
            http,
            url: document_url(base),
        })
    }

    /// The document's URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The document, read and bounded by [`parse`].
    ///
    /// # Errors
    ///
    /// IMDS unreachable or answering an error, a document too long, not text or not the
    /// Scheduled Events JSON.
    pub async fn document(&self) -> Result<ScheduledEvents> {
        let mut response = self
            .http
            .get(self.url.clone())
            .header("Metadata", "true")
            .send()
            .await
            .map_err(|source| Error::GetDocument {
                url: self.url.to_string(),
                source,
            })?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|source| Error::GetDocument {
                url: self.url.to_string(),
                source,
            })?
        {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(Error::DocumentTooLong {
                    max: MAX_DOCUMENT_BYTES,
                });
            }
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(Error::DocumentStatus {
                url: self.url.to_string(),
                status: status.as_u16(),
                body: start_of(&body),
            });
        }
        let text = std::str::from_utf8(&body).map_err(|_| Error::DocumentNotText)?;
        parse(text).map_err(Error::ParseDocument)
    }

    /// Acknowledges the event `event_id`: `POST {"StartRequests":[{"EventId":"<id>"}]}` to the
    /// document's URL. IMDS answers 200 also for an event approved already.
    ///
    /// # Errors
    ///
    /// IMDS unreachable or answering anything but success.
    pub async fn start(&self, event_id: &str) -> Result<()> {
        let failed = |source| Error::PostStartRequest {
            event_id: event_id.to_owned(),
            source,
        };
        let response = self
            .http
            .post(self.url.clone())
            .header("Metadata", "true")
            .json(&json!({ "StartRequests": [{ "EventId": event_id }] }))
            .send()
            .await
            .map_err(failed)?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response.bytes().await.map_err(failed)?;
        Err(Error::StartRequestStatus {
            event_id: event_id.to_owned(),
            status: status.as_u16(),
            body: start_of(&body),
        })
    }
}

/// `<base>/metadata/scheduledevents?api-version=2020-07-01`.
fn document_url(base: &Url) -> Url {
    let mut url = base.clone();
    if let Ok(mut segments) = url.path_segments_mut() {
        segments
            .pop_if_empty()
            .extend(["metadata", "scheduledevents"]);
    }
    url.set_query(Some(&format!("api-version={API_VERSION}")));
    url
}

/// The start of an error answer's body, as text, for the log.
fn start_of(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut end = text.len().min(ERROR_BODY_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default().trim().to_owned()
}

#[cfg(test)]
mod tests;
