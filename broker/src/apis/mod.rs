//! Request handlers, one module per API (or per family of small APIs). Each
//! takes the decoded request and its version and returns the response.

pub mod fetch;
pub mod metadata;
pub mod produce;
