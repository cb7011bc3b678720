//! Property tests of [`decide`].
