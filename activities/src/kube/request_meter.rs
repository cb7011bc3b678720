//! Counts every apiserver request the client sends into `nodewright_kube_requests_total`
//! (verb, resource, code): a tower layer at the top of the client's stack.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use nodewright_model::kube_request_label::kube_request_labels;
use tower::{Layer, Service};

/// The layer: wraps a client's service in [`RequestMeter`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestMeterLayer;

impl<S> Layer<S> for RequestMeterLayer {
    type Service = RequestMeter<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestMeter { inner }
    }
}

/// A service that counts each request once its answer's status is known (a watch when its
/// stream starts), or as `transport` when none came.
#[derive(Debug, Clone)]
pub struct RequestMeter<S> {
    inner: S,
}

impl<S, RequestBody, ResponseBody> Service<Request<RequestBody>> for RequestMeter<S>
where
    S: Service<Request<RequestBody>, Response = Response<ResponseBody>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    ResponseBody: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let (verb, resource) = kube_request_labels(
            request.method().as_str(),
            request.uri().path(),
            request.uri().query().unwrap_or_default(),
        );
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            let code = match &answer {
                Ok(response) => response.status().as_str().to_owned(),
                Err(_) => "transport".to_owned(),
            };
            crate::metrics::kube_request(verb, &resource, &code);
            answer
        })
    }
}
