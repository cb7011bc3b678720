//! Fault injection: rules that make matching requests or operations fail, hang or throttle, or
//! list pages link back to themselves.
//!
//! A rule matches on the operation name (`vm.put`, `disk.delete`, `csi.detach`, ...), the request
//! path (for [`crate::compute::Compute`] calls: the VM id), the VM name and the availability zone
//! of the VM (or disk) the request or operation concerns, each a case-insensitive glob (`*` any run, `?` one character) or several separated by `|`; and on the HTTP method, a
//! `|`-separated list of methods where `write` stands for PUT, PATCH, DELETE and POST. It fires
//! with `probability` (default 1), or on every `every`-th match only, and at most `count` times
//! (default unlimited).
//!
//! Each time a request or operation is checked against the rules of its kinds, every rule that
//! matches counts the match (`matched`), even when an earlier rule fires for it; the first rule
//! that is due (firings left, its turn for `every`, its probability roll won) fires.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::error::ArmError;

/// How long a `stall` rule holds a request when it says nothing.
pub const DEFAULT_STALL_SECONDS: u64 = 60;

/// The longest a `stall` rule may hold a request.
pub const MAX_STALL_SECONDS: u64 = 3600;

/// What a rule does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// 429 with `Retry-After` and rate-limit headers (network: `RetryableErrorDueToAnotherOperation`).
    Throttle,
    /// A 5xx (`status`, default 500) with `code` (default `InternalServerError`).
    ServerError,
    /// 409 with `code` (default `Conflict`).
    Conflict,
    /// The request is accepted but its async operation ends `Failed` with `code`/`message`.
    FailOperation,
    /// A disk detach never completes while the rule exists.
    HangDetach,
    /// The matching VMs' nodes never join the cluster.
    NeverJoins,
    /// A list page (`vm.list`, `nic.list`, `disk.list`) answers with its items and a `nextLink`
    /// that points back at that same page, so a client following it never reaches the end.
    RepeatNextLink,
    /// The request is held `seconds` (default 60) before it is answered as usual, as a
    /// congested or half-open connection would hold it. A client that gives up first leaves a
    /// record with status 499 (client closed request) in the request log.
    Stall,
}

/// One fault rule, as written in the config file or sent to `/sandbox/faults`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// What happens.
    pub kind: FaultKind,
    /// Glob over the operation name, e.g. `vm.*` or `vm.*|disk.*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// HTTP methods separated by `|`, e.g. `PUT` or `PUT|PATCH`; `write` stands for PUT, PATCH,
    /// DELETE and POST (`csi.*` calls are POST).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Glob over the request path, e.g. `*/virtualMachines/pool-a-*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Glob over the VM name the request or operation concerns (for `operation.status` and
    /// `operation.result`, the VM the polled operation works on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<String>,
    /// Glob over the availability zone (`"2"`, `"1|3"`) of the VM or disk the request or operation
    /// concerns: a create's body `zones[0]`, else the stored resource's. A target outside any zone
    /// never matches a rule with a zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Glob over the VM size (`Standard_D4s_v5`, `Standard_D*s_v5`) of the VM the request or
    /// operation concerns: a create's or update's body `hardwareProfile.vmSize`, else the stored
    /// VM's. A target that is not a VM never matches a rule with a size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Glob over the priority (`Regular`, `Spot`, `Low`; `Spot|Low` for every Spot VM) of the VM
    /// the request or operation concerns: the body's `priority`, `Regular` when a VM body has
    /// none, else the stored VM's. A target that is not a VM never matches a rule with a
    /// priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// Chance of firing on a match, 0..=1 (default 1). Not with `every`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
    /// Fire on the N-th, 2N-th, 3N-th... match of this rule only (N >= 1). Not with
    /// `probability`, nor for `never_joins`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<u64>,
    /// Fire at most this many times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// HTTP status for `server_error` (default 500), `conflict` (409) and `fail_operation`
    /// (the status of its Location result, default 400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// ARM error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// ARM error message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `Retry-After` seconds for `throttle` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// How long a `stall` holds the request, in seconds (default 60, at most 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
}

/// A rule in force, with its id and how often it fired.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActiveRule {
    /// Id assigned by the emulator; `DELETE /sandbox/faults/{id}` removes it.
    pub id: u64,
    /// How many times it fired.
    pub fired: u64,
    /// How many requests or operations matched it (whether it fired or not).
    #[serde(default)]
    pub matched: u64,
    /// The rule.
    #[serde(flatten)]
    pub rule: FaultRule,
}

impl ActiveRule {
    /// Whether the rule has firings left and, with `every`, the match just counted is its turn
    /// (an `every` of 0 is never due).
    fn due(&self) -> bool {
        if self.rule.count.is_some_and(|c| self.fired >= c) {
            return false;
        }
        self.rule
            .every
            .is_none_or(|n| self.matched.checked_rem(n) == Some(0))
    }
}

/// What a request or operation is, for matching.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// Operation name, e.g. `vm.put`.
    pub operation: &'a str,
    /// HTTP method (`POST` for `csi.*`).
    pub method: &'a str,
    /// Request path, or the VM id for `csi.*`.
    pub path: &'a str,
    /// VM name, when the target concerns one.
    pub vm: Option<&'a str>,
    /// Availability zone of the VM or disk the target concerns, when it has one.
    pub zone: Option<&'a str>,
    /// VM size of the VM the target concerns, when it concerns one.
    pub size: Option<&'a str>,
    /// Priority (`Regular`, `Spot`, `Low`) of the VM the target concerns, when it concerns one.
    pub priority: Option<&'a str>,
}

/// What a request or operation concerns, for the rules' `zone`, `size` and `priority`: read
/// from a resource body (a request's or the stored one's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Concerns {
    /// `zones[0]`.
    pub zone: Option<String>,
    /// `properties.hardwareProfile.vmSize`.
    pub size: Option<String>,
    /// `properties.priority`; `Regular` for a VM body (one with a `vmSize`) without one.
    pub priority: Option<String>,
}

impl Concerns {
    /// What `body` says.
    pub fn of(body: &serde_json::Value) -> Self {
        let text = |v: &serde_json::Value| v.as_str().map(str::to_owned);
        let size = text(&body["properties"]["hardwareProfile"]["vmSize"]);
        let priority = text(&body["properties"]["priority"])
            .or_else(|| size.as_ref().map(|_| "Regular".to_owned()));
        Self {
            zone: text(&body["zones"][0]),
            size,
            priority,
        }
    }

    /// Each field of `self`, else `other`'s (a request body's, else the stored resource's).
    pub fn or(self, other: Self) -> Self {
        Self {
            zone: self.zone.or(other.zone),
            size: self.size.or(other.size),
            priority: self.priority.or(other.priority),
        }
    }
}

/// The rules in force.
#[derive(Debug, Clone, Default)]
pub struct FaultSet {
    rules: Vec<ActiveRule>,
    next_id: u64,
}

impl FaultSet {
    /// Adds a rule and returns it with its id.
    pub fn add(&mut self, rule: FaultRule) -> ActiveRule {
        self.next_id += 1;
        let active = ActiveRule {
            id: self.next_id,
            fired: 0,
            matched: 0,
            rule,
        };
        self.rules.push(active.clone());
        active
    }

    /// Removes every rule.
    pub fn clear(&mut self) {
        self.rules.clear();
    }

    /// Removes one rule; false when there was none with that id.
    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.rules.len();
        self.rules.retain(|r| r.id != id);
        before != self.rules.len()
    }

    /// The rules in force.
    pub fn list(&self) -> &[ActiveRule] {
        &self.rules
    }

    /// Whether a rule with this id is in force.
    pub fn contains(&self, id: u64) -> bool {
        self.rules.iter().any(|r| r.id == id)
    }

    /// The first rule of one of `kinds` that matches `target`, still has firings left, has its
    /// turn (`every`) and wins its probability roll; counts the firing, and the match on every
    /// rule of `kinds` that matches.
    pub fn fire(&mut self, kinds: &[FaultKind], target: Target<'_>) -> Option<ActiveRule> {
        let mut fired = None;
        for active in &mut self.rules {
            if !kinds.contains(&active.rule.kind) || !active.rule.matches(target) {
                continue;
            }
            active.matched += 1;
            if fired.is_some() || !active.due() {
                continue;
            }
            let p = active.rule.probability.unwrap_or(1.0);
            if p < 1.0 && !rand::rng().random_bool(p.clamp(0.0, 1.0)) {
                continue;
            }
            active.fired += 1;
            fired = Some(active.clone());
        }
        fired
    }

    /// Whether a rule of `kind` matches `target` (ignoring probability and count).
    pub fn applies(&self, kind: FaultKind, target: Target<'_>) -> bool {
        self.rules
            .iter()
            .any(|r| r.rule.kind == kind && r.rule.matches(target))
    }
}

impl FaultRule {
    /// A rule of `kind` with no filters.
    pub fn new(kind: FaultKind) -> Self {
        Self {
            kind,
            operation: None,
            method: None,
            path: None,
            vm: None,
            zone: None,
            size: None,
            priority: None,
            probability: None,
            every: None,
            count: None,
            status: None,
            code: None,
            message: None,
            retry_after: None,
            seconds: None,
        }
    }

    /// Whether every filter of the rule accepts `target`.
    pub fn matches(&self, target: Target<'_>) -> bool {
        let ok = |pattern: &Option<String>, value: Option<&str>| match (pattern, value) {
            (None, _) => true,
            (Some(p), Some(v)) => p.split('|').any(|alternative| glob(alternative.trim(), v)),
            (Some(_), None) => false,
        };
        ok(&self.operation, Some(target.operation))
            && self
                .method
                .as_ref()
                .is_none_or(|m| method_matches(m, target.method))
            && ok(&self.path, Some(target.path))
            && ok(&self.vm, target.vm)
            && ok(&self.zone, target.zone)
            && ok(&self.size, target.size)
            && ok(&self.priority, target.priority)
    }

    /// Checks what serde cannot: `every` is at least 1 and comes neither with `probability` nor
    /// on a `never_joins` rule, and `method` names known methods.
    pub fn validate(&self) -> Result<(), InvalidRule> {
        let invalid = |field: &'static str, message: String| Err(InvalidRule { field, message });
        if let Some(every) = self.every {
            if every == 0 {
                return invalid("every", "every must be at least 1".into());
            }
            if self.probability.is_some() {
                return invalid(
                    "every",
                    "every and probability cannot be combined: a periodic rule fires on every N-th match, deterministically".into(),
                );
            }
            if self.kind == FaultKind::NeverJoins {
                return invalid(
                    "every",
                    "every does not apply to never_joins rules (they hold for every matching VM)"
                        .into(),
                );
            }
        }
        if let Some(seconds) = self.seconds {
            if self.kind != FaultKind::Stall {
                return invalid("seconds", "seconds applies to stall rules only".into());
            }
            if seconds > MAX_STALL_SECONDS {
                return invalid(
                    "seconds",
                    format!("a stall holds a request at most {MAX_STALL_SECONDS} seconds"),
                );
            }
        }
        if let Some(method) = &self.method {
            let unknown: Vec<&str> = method
                .split('|')
                .map(str::trim)
                .filter(|m| {
                    !KNOWN_METHODS
                        .iter()
                        .chain(&[WRITE])
                        .any(|k| k.eq_ignore_ascii_case(m))
                })
                .collect();
            if !unknown.is_empty() {
                return invalid(
                    "method",
                    format!(
                        "unknown method '{}' in '{method}': use {} or write, separated by |",
                        unknown.join("', '"),
                        KNOWN_METHODS.join(", ")
                    ),
                );
            }
        }
        Ok(())
    }
}

/// The method alias for every write.
const WRITE: &str = "write";

/// The methods `write` stands for.
const WRITE_METHODS: [&str; 4] = ["PUT", "PATCH", "DELETE", "POST"];

/// The methods a rule may name.
const KNOWN_METHODS: [&str; 7] = ["GET", "PUT", "PATCH", "DELETE", "POST", "HEAD", "OPTIONS"];

/// Whether the `|`-separated method list `spec` accepts `method`.
fn method_matches(spec: &str, method: &str) -> bool {
    spec.split('|').map(str::trim).any(|m| {
        if m.eq_ignore_ascii_case(WRITE) {
            WRITE_METHODS.iter().any(|w| w.eq_ignore_ascii_case(method))
        } else {
            m.eq_ignore_ascii_case(method)
        }
    })
}

/// Why a fault rule was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidRule {
    /// The offending field, e.g. `every`.
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

/// Case-insensitive glob: `*` matches any run of characters, `?` exactly one.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Maps a fired request-level fault rule to its answer.
pub fn fault_error(kind: FaultKind, rule: &FaultRule, path: &str) -> Option<ArmError> {
    let message = |default: &str| rule.message.clone().unwrap_or_else(|| default.to_owned());
    match kind {
        FaultKind::Throttle => Some(ArmError::Throttled {
            retry_after: rule.retry_after.unwrap_or(1),
            network: path.to_ascii_lowercase().contains("/microsoft.network/"),
        }),
        FaultKind::ServerError => Some(ArmError::rejected(
            rule.status.unwrap_or(500),
            rule.code.as_deref().unwrap_or("InternalServerError"),
            message("An internal server error occurred (injected)."),
        )),
        FaultKind::Conflict => Some(ArmError::rejected(
            rule.status.unwrap_or(409),
            rule.code.as_deref().unwrap_or("Conflict"),
            message("Another operation is in progress on the resource (injected)."),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target<'a>(operation: &'a str, path: &'a str, vm: Option<&'a str>) -> Target<'a> {
        Target {
            operation,
            method: "PUT",
            path,
            vm,
            zone: None,
            size: None,
            priority: None,
        }
    }

    #[test]
    fn glob_matches_stars_and_question_marks_case_insensitively() {
        assert!(glob("vm.*", "vm.put"));
        assert!(glob("*", ""));
        assert!(glob(
            "*/virtualMachines/pool-?-*",
            "/s/x/virtualmachines/pool-a-12"
        ));
        assert!(!glob("vm.*", "disk.put"));
        assert!(!glob("pool-?", "pool-ab"));
        assert!(glob("a*b*c", "aXXbYYc"));
        assert!(!glob("a*b*c", "aXXbYY"));
    }

    #[test]
    fn a_rule_matches_only_when_every_filter_does() {
        let mut rule = FaultRule::new(FaultKind::Throttle);
        rule.operation = Some("vm.*".into());
        rule.vm = Some("pool-a-*".into());
        assert!(rule.matches(target("vm.put", "/p", Some("pool-a-1"))));
        assert!(!rule.matches(target("vm.put", "/p", Some("pool-b-1"))));
        assert!(!rule.matches(target("vm.put", "/p", None)));
        assert!(!rule.matches(target("disk.put", "/p", Some("pool-a-1"))));
        rule.method = Some("get".into());
        assert!(!rule.matches(target("vm.put", "/p", Some("pool-a-1"))));
    }

    #[test]
    fn a_zone_filter_matches_the_targets_zone_and_never_a_target_outside_zones() {
        let mut rule = FaultRule::new(FaultKind::FailOperation);
        rule.operation = Some("vm.put".into());
        rule.zone = Some("2".into());
        let in_zone = |zone| Target {
            zone,
            ..target("vm.put", "/p", Some("pool-a-1"))
        };
        assert!(rule.matches(in_zone(Some("2"))));
        assert!(!rule.matches(in_zone(Some("1"))));
        assert!(!rule.matches(in_zone(Some("12"))));
        assert!(!rule.matches(in_zone(None)));
        rule.zone = Some("1|3".into());
        assert!(rule.matches(in_zone(Some("3"))));
        assert!(!rule.matches(in_zone(Some("2"))));
        rule.zone = None;
        assert!(rule.matches(in_zone(None)));
    }

    #[test]
    fn size_and_priority_filters_match_the_targets_vm_and_never_a_target_without_one() {
        let mut rule = FaultRule::new(FaultKind::FailOperation);
        rule.size = Some("Standard_D4s_v5".into());
        rule.priority = Some("Spot|Low".into());
        rule.zone = Some("1".into());
        let vm = |size, priority, zone| Target {
            size,
            priority,
            zone,
            ..target("vm.put", "/p", Some("spot-1"))
        };
        assert!(rule.matches(vm(Some("standard_d4s_v5"), Some("Spot"), Some("1"))));
        assert!(rule.matches(vm(Some("Standard_D4s_v5"), Some("Low"), Some("1"))));
        assert!(!rule.matches(vm(Some("Standard_D4s_v5"), Some("Regular"), Some("1"))));
        assert!(!rule.matches(vm(Some("Standard_D2s_v5"), Some("Spot"), Some("1"))));
        assert!(!rule.matches(vm(Some("Standard_D4s_v5"), Some("Spot"), Some("2"))));
        assert!(!rule.matches(vm(None, None, Some("1"))));
    }

    #[test]
    fn concerns_read_a_vm_body_and_fall_back_field_by_field() {
        let put = Concerns::of(&serde_json::json!({
            "zones": ["1"],
            "properties": {"hardwareProfile": {"vmSize": "Standard_D4s_v5"}},
        }));
        assert_eq!(
            put.priority.as_deref(),
            Some("Regular"),
            "a VM body without priority"
        );
        let patch = Concerns::of(&serde_json::json!({"tags": {"a": "b"}}));
        assert_eq!(patch, Concerns::default());
        let stored = Concerns::of(&serde_json::json!({
            "zones": ["3"],
            "properties": {"priority": "Spot", "hardwareProfile": {"vmSize": "Standard_D2s_v5"}},
        }));
        let merged = patch.or(stored.clone());
        assert_eq!(merged, stored);
        let disk =
            Concerns::of(&serde_json::json!({"zones": ["2"], "properties": {"diskSizeGB": 4}}));
        assert_eq!((disk.size, disk.priority), (None, None));
    }

    #[test]
    fn a_zone_rule_parses_from_toml() {
        let rule: FaultRule = toml::from_str(
            r#"
            kind = "fail_operation"
            operation = "vm.put"
            zone = "2"
            code = "ZonalAllocationFailed"
            "#,
        )
        .unwrap();
        assert_eq!(rule.zone.as_deref(), Some("2"));
    }

    #[test]
    fn a_counted_rule_fires_that_many_times() {
        let mut set = FaultSet::default();
        let mut rule = FaultRule::new(FaultKind::ServerError);
        rule.count = Some(2);
        set.add(rule);
        let t = target("vm.get", "/p", None);
        assert!(set.fire(&[FaultKind::ServerError], t).is_some());
        assert!(set.fire(&[FaultKind::ServerError], t).is_some());
        assert!(set.fire(&[FaultKind::ServerError], t).is_none());
        assert_eq!(set.list()[0].fired, 2);
    }

    #[test]
    fn a_zero_probability_rule_never_fires_and_other_kinds_are_ignored() {
        let mut set = FaultSet::default();
        let mut rule = FaultRule::new(FaultKind::Conflict);
        rule.probability = Some(0.0);
        let id = set.add(rule).id;
        let t = target("vm.get", "/p", None);
        assert!(set.fire(&[FaultKind::Conflict], t).is_none());
        assert!(set.fire(&[FaultKind::Throttle], t).is_none());
        assert!(set.remove(id));
        assert!(!set.contains(id));
    }

    #[test]
    fn a_periodic_rule_fires_on_every_nth_match_at_most_count_times() {
        let mut set = FaultSet::default();
        let mut rule = FaultRule::new(FaultKind::Throttle);
        rule.every = Some(3);
        rule.count = Some(2);
        set.add(rule);
        let t = target("vm.put", "/p", None);
        let fired: Vec<usize> = (1..=12)
            .filter(|_| set.fire(&[FaultKind::Throttle], t).is_some())
            .collect();
        assert_eq!(fired, [3, 6]);
        assert_eq!((set.list()[0].matched, set.list()[0].fired), (12, 2));
    }

    #[test]
    fn a_match_counts_on_every_matching_rule_even_when_an_earlier_one_fires() {
        let mut set = FaultSet::default();
        let mut first = FaultRule::new(FaultKind::ServerError);
        first.count = Some(1);
        set.add(first);
        let mut periodic = FaultRule::new(FaultKind::Throttle);
        periodic.every = Some(2);
        set.add(periodic);
        let kinds = [FaultKind::ServerError, FaultKind::Throttle];
        let t = target("vm.put", "/p", None);
        let kinds_fired: Vec<Option<FaultKind>> = (0..4)
            .map(|_| set.fire(&kinds, t).map(|r| r.rule.kind))
            .collect();
        assert_eq!(
            kinds_fired,
            [
                Some(FaultKind::ServerError),
                Some(FaultKind::Throttle),
                None,
                Some(FaultKind::Throttle)
            ]
        );
        assert_eq!(set.list()[1].matched, 4);
    }

    #[test]
    fn seconds_belong_to_stall_rules_and_are_bounded() {
        let with = |kind, seconds| {
            let mut rule = FaultRule::new(kind);
            rule.seconds = Some(seconds);
            rule.validate().map_err(|e| e.field)
        };
        assert_eq!(with(FaultKind::Stall, 25), Ok(()));
        assert_eq!(with(FaultKind::Stall, MAX_STALL_SECONDS), Ok(()));
        assert_eq!(
            with(FaultKind::Stall, MAX_STALL_SECONDS + 1),
            Err("seconds")
        );
        assert_eq!(with(FaultKind::Throttle, 5), Err("seconds"));
        assert_eq!(
            FaultRule::new(FaultKind::Stall)
                .validate()
                .map_err(|e| e.field),
            Ok(())
        );
    }

    #[test]
    fn method_lists_and_the_write_alias_match_as_documented() {
        let cases = [
            ("write", "PUT", true),
            ("write", "patch", true),
            ("write", "DELETE", true),
            ("write", "POST", true),
            ("write", "GET", false),
            ("PUT|DELETE", "DELETE", true),
            ("put | delete", "PUT", true),
            ("PUT|DELETE", "POST", false),
            ("GET|write", "GET", true),
        ];
        for (spec, method, expected) in cases {
            assert_eq!(method_matches(spec, method), expected, "{spec} vs {method}");
        }
    }

    #[test]
    fn glob_filters_take_alternatives_separated_by_bars() {
        let mut rule = FaultRule::new(FaultKind::Throttle);
        rule.operation = Some("vm.*|disk.*|nic.*".into());
        assert!(rule.matches(target("disk.put", "/p", None)));
        assert!(rule.matches(target("nic.delete", "/p", None)));
        assert!(!rule.matches(target("csi.attach", "/p", None)));
    }

    #[test]
    fn validation_refuses_what_serde_cannot() {
        let rule = |kind, every, probability: Option<f64>, method: Option<&str>| FaultRule {
            every,
            probability,
            method: method.map(str::to_owned),
            ..FaultRule::new(kind)
        };
        let cases = [
            (
                rule(FaultKind::Throttle, Some(3), None, Some("write")),
                None,
            ),
            (rule(FaultKind::Throttle, Some(1), None, None), None),
            (
                rule(FaultKind::Throttle, Some(0), None, None),
                Some("every"),
            ),
            (
                rule(FaultKind::Throttle, Some(2), Some(0.5), None),
                Some("every"),
            ),
            (
                rule(FaultKind::NeverJoins, Some(2), None, None),
                Some("every"),
            ),
            (
                rule(FaultKind::Conflict, None, None, Some("PUT|wrtie")),
                Some("method"),
            ),
            (
                rule(FaultKind::Conflict, None, None, Some("PUT|")),
                Some("method"),
            ),
            (
                rule(FaultKind::Conflict, None, Some(0.5), Some("get")),
                None,
            ),
        ];
        for (rule, refused) in cases {
            assert_eq!(rule.validate().err().map(|e| e.field), refused, "{rule:?}");
        }
    }

    #[test]
    fn an_unvalidated_every_of_zero_never_fires() {
        let mut set = FaultSet::default();
        let mut rule = FaultRule::new(FaultKind::Throttle);
        rule.every = Some(0);
        set.add(rule);
        let t = target("vm.put", "/p", None);
        assert!(set.fire(&[FaultKind::Throttle], t).is_none());
    }

    #[test]
    fn rules_parse_from_toml() {
        #[derive(Deserialize)]
        struct File {
            faults: Vec<FaultRule>,
        }
        let file: File = toml::from_str(
            r#"
            [[faults]]
            kind = "fail_operation"
            operation = "vm.put"
            code = "AllocationFailed"
            count = 1
            "#,
        )
        .unwrap();
        assert_eq!(file.faults[0].kind, FaultKind::FailOperation);
        assert_eq!(file.faults[0].code.as_deref(), Some("AllocationFailed"));
    }
}
