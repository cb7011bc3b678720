//! One problem of a pool file ([`FieldError`]): a leaf, so that every module that reports in the
//! pool file's words (the validation, and the policies kept beside their decisions such as
//! `scheduled_events::policy`) can use it without a cycle through the validation.

/// One value of a pool file that cannot be used, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem} (got {value}); {fix}")]
pub struct FieldError {
    /// The value's path in the file, e.g. `spec.template.taints[1].effect` or
    /// `spec.template.labels["example.com/role"]`.
    pub field: String,
    /// The value as written, quoted when it is a string (long values are shortened).
    pub value: String,
    /// What is wrong with it.
    pub problem: String,
    /// What to write instead.
    pub fix: String,
}
