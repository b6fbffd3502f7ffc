//! Locate, verify and parse amdgpu firmware blobs.
