//! The ARM client: one `reqwest` client (rustls, a request timeout, no retries: Temporal
//! retries), a token source, and the resource group it manages.
//!
//! Every call goes through one `send`, which attaches `Authorization: Bearer`,
//! `x-ms-correlation-request-id` and `Accept`, and turns a non-2xx answer into
//! [`CallError::Arm`] with the model's [`ArmFailure`]. The resource modules
//! (`virtual_machines`, `disks`, `network_interfaces`) are typed wrappers over the generic
//! operations here.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use nodewright_model::arm::{ArmFailure, Disposition};
use reqwest::header::{ACCEPT, HeaderMap, LOCATION};
use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::credential::Credential;
use super::error::{CallError, Error};
use super::operation::{OperationHandle, PollProtocol};

/// The public Azure cloud's Resource Manager endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://management.azure.com/";

/// How long one HTTP exchange may take, connect to last byte.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The header that ties the calls of one logical operation together in ARM's logs.
pub const CORRELATION_ID_HEADER: &str = "x-ms-correlation-request-id";
/// The header ARM puts its request id in.
pub const REQUEST_ID_HEADER: &str = "x-ms-request-id";
/// The header ARM may put its error code in.
pub const ERROR_CODE_HEADER: &str = "x-ms-error-code";
/// The header with the operation resource URL.
pub const ASYNC_OPERATION_HEADER: &str = "azure-asyncoperation";
/// The header with the wait before the next poll or retry, in seconds.
pub const RETRY_AFTER_HEADER: &str = "retry-after";

/// Where and as whom the client talks to ARM.
#[derive(Debug, Clone)]
pub struct ArmConfig {
    /// The ARM endpoint, e.g. [`DEFAULT_ENDPOINT`] or the sandbox's `http://127.0.0.1:port/`.
    pub endpoint: Url,
    /// The subscription id.
    pub subscription_id: String,
    /// The resource group every call works in.
    pub resource_group: String,
    /// The timeout of each HTTP exchange.
    pub request_timeout: Duration,
}

impl ArmConfig {
    /// A config with [`DEFAULT_REQUEST_TIMEOUT`].
    pub fn new(
        endpoint: Url,
        subscription_id: impl Into<String>,
        resource_group: impl Into<String>,
    ) -> Self {
        Self {
            endpoint,
            subscription_id: subscription_id.into(),
            resource_group: resource_group.into(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

/// A thin, typed client for the ARM operations nodewright uses. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ArmClient {
    http: reqwest::Client,
    endpoint: Url,
    subscription_id: String,
    resource_group: String,
    credential: Arc<Credential>,
    correlation_id: Option<String>,
}

/// The immediate answer to a write (PUT, PATCH, POST): the resource when ARM returned one, and
/// the handle of the async operation when it is still running.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted<T> {
    /// The HTTP status (200, 201, 202).
    pub status: u16,
    /// The body, when there was one (usually with a non-terminal `provisioningState`).
    pub resource: Option<T>,
    /// The operation to poll, from `Azure-AsyncOperation`, else `Location`; `None` when done.
    pub operation: Option<OperationHandle>,
    /// `x-ms-request-id`.
    pub request_id: Option<String>,
}

/// The answer to a DELETE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deletion {
    /// ARM deleted it synchronously (200, 204), or accepted without a handle to poll.
    Deleted,
    /// ARM accepted the delete (202); poll the handle.
    Started(OperationHandle),
    /// The resource did not exist (404): a delete's success.
    AlreadyGone,
}

/// One HTTP answer with a 2xx status.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    pub(crate) fn request_id(&self) -> Option<String> {
        self.header(REQUEST_ID_HEADER).map(str::to_owned)
    }

    /// The body as `T`; an empty body is a decode error.
    pub(crate) fn json<T: DeserializeOwned>(&self) -> Result<T, CallError> {
        serde_json::from_slice(&self.body).map_err(|source| CallError::Decode {
            request_id: self.request_id(),
            source,
        })
    }

    /// The body as `T`, or `None` when it is empty.
    pub(crate) fn json_if_any<T: DeserializeOwned>(&self) -> Result<Option<T>, CallError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            Ok(None)
        } else {
            self.json().map(Some)
        }
    }
}

/// One page of a list: `{"value": [...], "nextLink": "..."}`.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Page<T> {
    #[serde(default = "Vec::new")]
    value: Vec<T>,
    #[serde(default)]
    next_link: Option<String>,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

impl ArmClient {
    /// Builds the client. Fails when the endpoint is not an `http(s)` base URL or the HTTP client
    /// cannot be built. The rustls crypto provider is reqwest's own (aws-lc-rs) unless the
    /// process installed a default, so no process-level provider is required.
    pub fn new(config: ArmConfig, credential: Credential) -> Result<Self, Error> {
        let endpoint = config.endpoint;
        if endpoint.cannot_be_a_base() || !matches!(endpoint.scheme(), "http" | "https") {
            return Err(Error::InvalidEndpoint {
                endpoint: endpoint.to_string(),
            });
        }
        crate::tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.request_timeout.min(Duration::from_secs(10)))
            .retry(reqwest::retry::never())
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("nodewright/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(Error::BuildHttpClient)?;
        Ok(Self {
            http,
            endpoint,
            subscription_id: config.subscription_id,
            resource_group: config.resource_group,
            credential: Arc::new(credential),
            correlation_id: None,
        })
    }

    /// A client that sends `correlation_id` as `x-ms-correlation-request-id` on every call (for
    /// example the workflow id), instead of a fresh id per call.
    pub fn with_correlation_id(&self, correlation_id: impl Into<String>) -> Self {
        Self {
            correlation_id: Some(correlation_id.into()),
            ..self.clone()
        }
    }

    /// The ARM endpoint.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    /// The subscription id.
    pub fn subscription_id(&self) -> &str {
        &self.subscription_id
    }

    /// The resource group.
    pub fn resource_group(&self) -> &str {
        &self.resource_group
    }

    /// The ARM id of `name` of `provider_type` (e.g. `Microsoft.Compute/disks`) in this
    /// resource group, as used in references such as `managedDisk.id`.
    pub fn resource_id(&self, provider_type: &str, name: &str) -> String {
        format!(
            "/subscriptions/{}/resourceGroups/{}/providers/{provider_type}/{name}",
            self.subscription_id, self.resource_group
        )
    }

    /// The URL of `provider_type` in this resource group, then each of `segments` (a name, an
    /// action), with `api-version`.
    pub(crate) fn resource_url(
        &self,
        provider_type: &str,
        segments: &[&str],
        api_version: &str,
    ) -> Url {
        let mut url = self.endpoint.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty()
                .extend([
                    "subscriptions",
                    self.subscription_id.as_str(),
                    "resourceGroups",
                    self.resource_group.as_str(),
                    "providers",
                ])
                .extend(provider_type.split('/'))
                .extend(segments);
        }
        url.query_pairs_mut()
            .append_pair("api-version", api_version);
        url
    }

    /// The URL of the resource with ARM id `id` (any subscription or resource group), with
    /// `api-version`.
    pub(crate) fn id_url(&self, id: &str, api_version: &str) -> Url {
        let mut url = self.endpoint.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty()
                .extend(id.split('/').filter(|segment| !segment.is_empty()));
        }
        url.query_pairs_mut()
            .append_pair("api-version", api_version);
        url
    }

    /// A URL ARM returned (absolute, or relative to the endpoint), if it is on the endpoint.
    pub(crate) fn returned_url(&self, value: &str) -> Result<Url, CallError> {
        match self.endpoint.join(value) {
            Ok(url) if url.origin() == self.endpoint.origin() => Ok(url),
            _ => Err(CallError::ForeignUrl {
                url: value.to_owned(),
            }),
        }
    }

    /// Sends one request with the token, correlation id and JSON body; a non-2xx answer is
    /// [`CallError::Arm`].
    pub(crate) async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<Value>,
    ) -> Result<Answer, CallError> {
        self.send_with_headers(method, url, body, &[]).await
    }

    /// [`Self::send`] with `headers` added to the request (e.g. `If-None-Match: *`).
    pub(crate) async fn send_with_headers(
        &self,
        method: Method,
        url: Url,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Result<Answer, CallError> {
        if url.origin() != self.endpoint.origin() {
            return Err(CallError::ForeignUrl {
                url: url.to_string(),
            });
        }
        let token = self.credential.token().await.map_err(CallError::Token)?;
        let correlation_id = self
            .correlation_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let mut request = self
            .http
            .request(method.clone(), url.clone())
            .bearer_auth(token.secret())
            .header(CORRELATION_ID_HEADER, correlation_id.as_str())
            .header(ACCEPT, "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = &body {
            request = request.json(body);
        }
        let operation = nodewright_model::arm::arm_operation_label(method.as_str(), url.path());
        let sent = std::time::Instant::now();
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                crate::metrics::arm_request(&operation, "transport", sent.elapsed().as_secs_f64());
                return Err(CallError::Transport(error));
            }
        };
        let status = response.status().as_u16();
        crate::metrics::arm_request(
            &operation,
            response.status().as_str(),
            sent.elapsed().as_secs_f64(),
        );
        let headers = response.headers().clone();
        record_rate_limits(&headers);
        let body = response
            .bytes()
            .await
            .map_err(CallError::Transport)?
            .to_vec();
        let request_id = header(&headers, REQUEST_ID_HEADER);
        tracing::debug!(%method, %url, status, ?request_id, %correlation_id, "ARM call");
        if (200..300).contains(&status) {
            return Ok(Answer {
                status,
                headers,
                body,
            });
        }
        Err(CallError::Arm(ArmFailure::from_response(
            status,
            header(&headers, ERROR_CODE_HEADER),
            request_id,
            header(&headers, RETRY_AFTER_HEADER),
            &body,
        )))
    }

    /// GETs `url` as `T`.
    pub(crate) async fn get<T: DeserializeOwned>(&self, url: Url) -> Result<T, CallError> {
        self.send(Method::GET, url, None).await?.json()
    }

    /// Sends a write and reads its immediate answer.
    pub(crate) async fn write<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: &B,
    ) -> Result<Submitted<T>, CallError> {
        self.write_with_headers(method, url, body, &[]).await
    }

    /// [`Self::write`] with `headers` added to the request.
    pub(crate) async fn write_with_headers<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: &B,
        headers: &[(&str, &str)],
    ) -> Result<Submitted<T>, CallError> {
        let body = serde_json::to_value(body).map_err(CallError::Encode)?;
        let answer = self
            .send_with_headers(method, url, Some(body), headers)
            .await?;
        let resource = if answer.status == 202 {
            None
        } else {
            answer.json_if_any()?
        };
        Ok(Submitted {
            status: answer.status,
            resource,
            operation: self.operation_handle(&answer)?,
            request_id: answer.request_id(),
        })
    }

    /// DELETEs `url`; a 404 is [`Deletion::AlreadyGone`].
    pub(crate) async fn delete(&self, url: Url) -> Result<Deletion, CallError> {
        let answer = match self.send(Method::DELETE, url, None).await {
            Ok(answer) => answer,
            Err(CallError::Arm(failure)) if failure.disposition() == Disposition::Gone => {
                return Ok(Deletion::AlreadyGone);
            }
            Err(other) => return Err(other),
        };
        Ok(match self.operation_handle(&answer)? {
            Some(handle) => Deletion::Started(handle),
            None => {
                if answer.status == 202 {
                    tracing::warn!(
                        request_id = ?answer.request_id(),
                        "ARM accepted a delete without a URL to poll"
                    );
                }
                Deletion::Deleted
            }
        })
    }

    /// GETs one page of a list; returns its items and the next page's URL (checked to be on
    /// this endpoint), none after the last page.
    pub(crate) async fn list_page<T: DeserializeOwned>(
        &self,
        url: Url,
    ) -> Result<(Vec<T>, Option<Url>), CallError> {
        let page: Page<T> = self.get(url).await?;
        let next = match page.next_link.filter(|link| !link.is_empty()) {
            Some(link) => Some(self.returned_url(&link)?),
            None => None,
        };
        Ok((page.value, next))
    }

    /// GETs every page of a list, following `nextLink`. A `nextLink` to a page already fetched
    /// ends the list, so a server whose links form a cycle cannot make it loop forever.
    pub(crate) async fn list<T: DeserializeOwned>(&self, url: Url) -> Result<Vec<T>, CallError> {
        let mut items = Vec::new();
        let mut fetched = HashSet::new();
        let mut next = Some(url);
        while let Some(url) = next.take() {
            let page: Page<T> = self.get(url.clone()).await?;
            items.extend(page.value);
            fetched.insert(url);
            next = match page.next_link.filter(|link| !link.is_empty()) {
                Some(link) => {
                    let link = self.returned_url(&link)?;
                    if fetched.contains(&link) {
                        tracing::warn!(%link, "ARM returned a page already fetched as nextLink");
                        None
                    } else {
                        Some(link)
                    }
                }
                None => None,
            };
        }
        Ok(items)
    }

    /// The operation to poll: `Azure-AsyncOperation`, else `Location` (only on a 201/202:
    /// a 200's `Location` is not a polling URL).
    pub(crate) fn operation_handle(
        &self,
        answer: &Answer,
    ) -> Result<Option<OperationHandle>, CallError> {
        let retry_after_seconds = answer
            .header(RETRY_AFTER_HEADER)
            .and_then(nodewright_model::arm::parse_retry_after)
            .map(|wait| wait.as_secs());
        let (protocol, value) = match (
            answer.header(ASYNC_OPERATION_HEADER),
            answer.header(LOCATION.as_str()),
        ) {
            (Some(url), _) => (PollProtocol::AzureAsyncOperation, url),
            (None, Some(url)) if matches!(answer.status, 201 | 202) => {
                (PollProtocol::Location, url)
            }
            _ => return Ok(None),
        };
        Ok(Some(OperationHandle {
            protocol,
            url: self.returned_url(value)?.to_string(),
            retry_after_seconds,
            accepted_at: Some(chrono::Utc::now()),
        }))
    }
}

/// ARM's `x-ms-ratelimit-remaining-subscription-{reads,writes}` headers, into
/// `nodewright_arm_ratelimit_remaining`.
fn record_rate_limits(headers: &reqwest::header::HeaderMap) {
    for (name, scope) in [
        (
            "x-ms-ratelimit-remaining-subscription-reads",
            "subscription_reads",
        ),
        (
            "x-ms-ratelimit-remaining-subscription-writes",
            "subscription_writes",
        ),
    ] {
        if let Some(remaining) = header(headers, name).and_then(|value| value.parse::<f64>().ok()) {
            crate::metrics::arm_ratelimit_remaining(scope, remaining);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(endpoint: &str) -> ArmClient {
        let config = ArmConfig::new(endpoint.parse().expect("url"), "sub-1", "rg-1");
        ArmClient::new(config, Credential::fixed("t")).expect("client")
    }

    #[test]
    fn resource_urls_keep_an_endpoint_path_and_carry_the_api_version() {
        let url = client("http://127.0.0.1:8080/arm/").resource_url(
            "Microsoft.Compute/virtualMachines",
            &["vm-1", "attachDetachDataDisks"],
            "2024-07-01",
        );
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8080/arm/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Compute/virtualMachines/vm-1/attachDetachDataDisks?api-version=2024-07-01"
        );
    }

    #[test]
    fn urls_off_the_endpoint_are_refused() {
        let arm = client("https://management.azure.com/");
        assert!(
            arm.returned_url("https://management.azure.com/x?y=1")
                .is_ok()
        );
        assert!(arm.returned_url("/relative/op").is_ok());
        for foreign in ["https://evil.example/op", "http://management.azure.com/op"] {
            assert!(
                matches!(arm.returned_url(foreign), Err(CallError::ForeignUrl { .. })),
                "{foreign}"
            );
        }
    }

    #[test]
    fn endpoints_must_be_http_base_urls() {
        for endpoint in ["mailto:a@b.c", "ftp://arm/"] {
            let config = ArmConfig::new(endpoint.parse().expect("url"), "s", "r");
            assert!(
                matches!(
                    ArmClient::new(config, Credential::fixed("t")),
                    Err(Error::InvalidEndpoint { .. })
                ),
                "{endpoint}"
            );
        }
    }
}
