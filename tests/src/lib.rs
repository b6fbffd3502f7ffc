//! Shared helpers of the workspace's end-to-end tests.
