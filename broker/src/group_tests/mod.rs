//! The group coordinator (`ottla-group-coordinator`) through the broker's
//! request handlers, on a broker of its own.

mod consumer_tests;
mod migration_tests;
mod share_tests;
mod streams_tests;
mod tests;
