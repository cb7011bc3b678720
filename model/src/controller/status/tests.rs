//! Tests of [`conditions`] and [`push_action`].
