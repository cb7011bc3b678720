//! Following list pages without end: a `nextLink` (or continue token) seen before, or more
//! pages than [`limits::MAX_SWEEP_LIST_PAGES`], stops the listing, and the sweep freezes
//! (deletes nothing) with the reason instead of growing its history until Temporal ends it.

use std::collections::BTreeSet;

use crate::limits;

/// What to do after a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageStep {
    /// The last page: the listing is complete.
    Done,
    /// Ask for the page at this link or token.
    Follow(String),
    /// Stop: the listing cannot be trusted (why, for people).
    Stop(String),
}

/// The links a listing has followed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageGuard {
    seen: BTreeSet<String>,
    pages: u32,
}

impl PageGuard {
    /// A listing that has read no page yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// After a page of `what` (`VMs`, `Nodes`) whose next link is `next`: whether to follow it.
    pub fn after_page(&mut self, what: &str, next: Option<String>) -> PageStep {
        self.pages = self.pages.saturating_add(1);
        let Some(next) = next else {
            return PageStep::Done;
        };
        if self.seen.contains(&next) {
            return PageStep::Stop(format!(
                "listing {what} came back to a page it had read (page {}): the list's next link repeats, so the listing is not trusted",
                self.pages.saturating_add(1)
            ));
        }
        if self.pages >= limits::MAX_SWEEP_LIST_PAGES {
            return PageStep::Stop(format!(
                "listing {what} passed {} pages, the most a sweep follows: the listing is not trusted",
                limits::MAX_SWEEP_LIST_PAGES
            ));
        }
        self.seen.insert(next.clone());
        PageStep::Follow(next)
    }
}
