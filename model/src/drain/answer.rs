//! What the drain does with an eviction the apiserver refused for another reason than a
//! PodDisruptionBudget allowing no disruption now (429): every answer is read on purpose.
//!
//! - 500 "more than one PodDisruptionBudget": the eviction API cannot evict a pod that several
//!   budgets select (a common accident: a team-wide budget beside a per-service one). Waiting
//!   does not help until someone removes a budget; the drain retries every PDB retry interval
//!   (the budgets named in the status) and force mode takes over at the deadline.
//! - 403 `NamespaceTerminating`: the namespace is being deleted, so is the pod; the drain waits
//!   for it to go (it is not counted as evicted).
//! - An admission webhook's or ValidatingAdmissionPolicy's denial (a change freeze, a guard of
//!   a critical workload): retried until the deadline (the policy may change its mind), then
//!   force mode ([`is_admission_denial`]).
//! - No answer, a timeout, a 5xx or a 429 without a budget: the apiserver is busy or away;
//!   retried until the deadline.
//! - 401, or a 403 that is neither of those (RBAC: the worker's role lacks `create` on
//!   `pods/eviction`): not a refusal of this pod but of the worker; waiting cannot help and force
//!   mode would hide the missing permission, so the drain fails at once with the apiserver's
//!   words ([`is_not_permitted`]).
//! - Anything else (400, ...): retried until the deadline, with the apiserver's words in the
//!   status, so force mode still ends the drain.

/// The code an activity passes when no HTTP answer came (connection refused, timeout).
pub const NO_ANSWER: u16 = 0;

/// The apiserver's reason for an eviction refused because the namespace is being deleted.
pub const REASON_NAMESPACE_TERMINATING: &str = "NamespaceTerminating";

/// An eviction refused (not 2xx, not 404, not a 429 naming a budget), as the drain reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 500: the pod is selected by more than one PodDisruptionBudget.
    SeveralBudgets,
    /// 403 `NamespaceTerminating`: the pod goes with its namespace.
    NamespaceTerminating,
    /// An admission webhook or a ValidatingAdmissionPolicy denied the eviction.
    WebhookDenied,
    /// No answer, a timeout, 5xx or 429: the apiserver is unavailable or overloaded.
    Unavailable,
    /// Any other refusal.
    Other,
}

/// What the drain does after a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRefusal {
    /// Wait for the pod to go by itself (its namespace is deleted).
    AwaitGone,
    /// Try again after the PDB retry interval; force mode takes over at the deadline.
    RetryUntilDeadline,
}

/// Whether an answer with `code` and `message` is the eviction API's refusal of a pod several
/// PodDisruptionBudgets select.
pub fn is_several_budgets(code: u16, message: &str) -> bool {
    code == 500
        && message
            .to_ascii_lowercase()
            .contains("more than one poddisruptionbudget")
}

/// Whether an eviction answered `code`/`reason`/`message` says the worker may not evict at all
/// (401, or a 403 that is neither `NamespaceTerminating` nor an admission denial): the drain
/// then fails at once, naming the forbidden verb as the apiserver does.
pub fn is_not_permitted(code: u16, reason: &str, message: &str) -> bool {
    code == 401
        || (code == 403 && reason != REASON_NAMESPACE_TERMINATING && !is_admission_denial(message))
}

/// Whether an apiserver's `message` is an admission controller's denial of the request: a
/// webhook's (`admission webhook "x" denied the request: ...`) or a ValidatingAdmissionPolicy's
/// (`ValidatingAdmissionPolicy 'x' with binding 'y' denied request: ...`, answered 403 when the
/// policy's reason is Forbidden, 422 by default). Not a missing permission of the worker: a
/// policy of the cluster's owners, which may change.
pub fn is_admission_denial(message: &str) -> bool {
    let lowered = message.to_ascii_lowercase();
    (lowered.contains("admission webhook") && lowered.contains("denied"))
        || (lowered.contains("validatingadmissionpolicy") && lowered.contains("denied request"))
}

/// Reads a refused eviction: the HTTP `code` ([`NO_ANSWER`] when none came), the status
/// `reason` and `message`.
pub fn refusal_of(code: u16, reason: &str, message: &str) -> Refusal {
    if is_several_budgets(code, message) {
        Refusal::SeveralBudgets
    } else if code == 403 && reason == REASON_NAMESPACE_TERMINATING {
        Refusal::NamespaceTerminating
    } else if is_admission_denial(message) {
        Refusal::WebhookDenied
    } else if code == NO_ANSWER
        || code == 429
        || code >= 500
        || matches!(reason, "Timeout" | "ServerTimeout" | "TooManyRequests")
    {
        Refusal::Unavailable
    } else {
        Refusal::Other
    }
}

/// What the drain does after `refusal`.
pub fn after_refusal(refusal: Refusal) -> AfterRefusal {
    match refusal {
        Refusal::NamespaceTerminating => AfterRefusal::AwaitGone,
        Refusal::SeveralBudgets
        | Refusal::WebhookDenied
        | Refusal::Unavailable
        | Refusal::Other => AfterRefusal::RetryUntilDeadline,
    }
}

/// The status line of a pod whose eviction was refused: the cause in words, the `budgets`
/// selecting it (for several budgets) and the apiserver's `message`.
pub fn refusal_detail(refusal: Refusal, code: u16, budgets: &[String], message: &str) -> String {
    match refusal {
        Refusal::SeveralBudgets if budgets.is_empty() => format!(
            "eviction refused: the pod is selected by more than one PodDisruptionBudget, which the eviction API does not support; retried until the deadline, then force mode (remove one budget to let it go now): {message}"
        ),
        Refusal::SeveralBudgets => format!(
            "eviction refused: the pod is selected by more than one PodDisruptionBudget ({}), which the eviction API does not support; retried until the deadline, then force mode (remove one budget to let it go now)",
            budgets.join(", ")
        ),
        Refusal::NamespaceTerminating => {
            "its namespace is being deleted: waiting for the pod to go".to_owned()
        }
        Refusal::WebhookDenied => format!(
            "eviction denied by an admission webhook or policy; retried until the deadline: {message}"
        ),
        Refusal::Unavailable if code == NO_ANSWER => format!(
            "eviction not answered (apiserver unreachable or timed out); retried until the deadline: {message}"
        ),
        Refusal::Unavailable => format!(
            "eviction refused with {code} (apiserver unavailable); retried until the deadline: {message}"
        ),
        Refusal::Other => {
            format!("eviction refused with {code}; retried until the deadline: {message}")
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SEVERAL: &str = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

    #[test]
    fn a_worker_without_the_permission_fails_at_once() {
        let rbac = "pods \"web-1\" is forbidden: User \"system:serviceaccount:nodewright:worker\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"shop\"";
        // (code, reason, message, not permitted)
        let table = [
            (403, "Forbidden", rbac, true),
            (401, "Unauthorized", "Unauthorized", true),
            (
                403,
                REASON_NAMESPACE_TERMINATING,
                "namespace shop is terminating",
                false,
            ),
            (
                403,
                "Forbidden",
                "admission webhook \"guard.example.com\" denied the request: no",
                false,
            ),
            (
                403,
                "Forbidden",
                "pods \"web-1\" is forbidden: ValidatingAdmissionPolicy 'freeze' with binding 'freeze' denied request: evictions are paused",
                false,
            ),
            (500, "InternalError", SEVERAL, false),
            (429, "TooManyRequests", "slow down", false),
            (400, "BadRequest", "bad", false),
        ];
        for (code, reason, message, expected) in table {
            assert_eq!(
                is_not_permitted(code, reason, message),
                expected,
                "{code} {reason} {message}"
            );
        }
    }

    #[test]
    fn every_refusal_is_read_on_purpose() {
        use AfterRefusal::*;
        use Refusal::*;
        let table = [
            (
                500,
                "InternalError",
                SEVERAL,
                SeveralBudgets,
                RetryUntilDeadline,
            ),
            (
                403,
                "NamespaceTerminating",
                "pods \"web\" is forbidden: unable to create new content in namespace shop because it is being terminated",
                NamespaceTerminating,
                AwaitGone,
            ),
            (
                403,
                "Forbidden",
                "admission webhook \"guard.example.com\" denied the request: not now",
                WebhookDenied,
                RetryUntilDeadline,
            ),
            (
                400,
                "BadRequest",
                "admission webhook \"v.example\" denied the request",
                WebhookDenied,
                RetryUntilDeadline,
            ),
            (
                403,
                "Forbidden",
                "pods \"web-1\" is forbidden: ValidatingAdmissionPolicy 'freeze' with binding 'freeze' denied request: evictions are paused",
                WebhookDenied,
                RetryUntilDeadline,
            ),
            (
                422,
                "Invalid",
                "pods \"web-1\" is forbidden: ValidatingAdmissionPolicy 'freeze' with binding 'freeze' denied request: evictions are paused",
                WebhookDenied,
                RetryUntilDeadline,
            ),
            (0, "", "connection refused", Unavailable, RetryUntilDeadline),
            (
                503,
                "ServiceUnavailable",
                "",
                Unavailable,
                RetryUntilDeadline,
            ),
            (
                500,
                "InternalError",
                "etcdserver: request timed out",
                Unavailable,
                RetryUntilDeadline,
            ),
            (504, "Timeout", "", Unavailable, RetryUntilDeadline),
            (
                429,
                "TooManyRequests",
                "slow down",
                Unavailable,
                RetryUntilDeadline,
            ),
            (
                403,
                "Forbidden",
                "cannot create pods/eviction",
                Other,
                RetryUntilDeadline,
            ),
            (400, "BadRequest", "bad", Other, RetryUntilDeadline),
        ];
        for (code, reason, message, refusal, after) in table {
            assert_eq!(
                refusal_of(code, reason, message),
                refusal,
                "{code} {reason} {message}"
            );
            assert_eq!(after_refusal(refusal), after, "{refusal:?}");
        }
    }

    #[test]
    fn a_refusal_says_what_it_is_and_what_happens_next() {
        let budgets = ["shop/team".to_owned(), "shop/web".to_owned()];
        let table = [
            (
                Refusal::SeveralBudgets,
                500,
                &budgets[..],
                SEVERAL,
                "eviction refused: the pod is selected by more than one PodDisruptionBudget (shop/team, shop/web), which the eviction API does not support; retried until the deadline, then force mode (remove one budget to let it go now)",
            ),
            (
                Refusal::NamespaceTerminating,
                403,
                &[][..],
                "x",
                "its namespace is being deleted: waiting for the pod to go",
            ),
            (
                Refusal::Unavailable,
                0,
                &[][..],
                "connection refused",
                "eviction not answered (apiserver unreachable or timed out); retried until the deadline: connection refused",
            ),
            (
                Refusal::Unavailable,
                503,
                &[][..],
                "down",
                "eviction refused with 503 (apiserver unavailable); retried until the deadline: down",
            ),
            (
                Refusal::Other,
                400,
                &[][..],
                "bad",
                "eviction refused with 400; retried until the deadline: bad",
            ),
        ];
        for (refusal, code, budgets, message, expected) in table {
            assert_eq!(refusal_detail(refusal, code, budgets, message), expected);
        }
    }

    proptest! {
        #[test]
        fn only_a_terminating_namespace_waits_for_the_pod_every_other_refusal_retries(
            code in 0u16..600,
            reason in "[A-Za-z]{0,24}",
            message in ".{0,80}",
        ) {
            let refusal = refusal_of(code, &reason, &message);
            let waits = after_refusal(refusal) == AfterRefusal::AwaitGone;
            prop_assert_eq!(waits, code == 403 && reason == REASON_NAMESPACE_TERMINATING);
            prop_assert!(!refusal_detail(refusal, code, &[], &message).is_empty());
        }
    }
}
