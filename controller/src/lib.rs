//! Metadata quorum (openraft), KRaft-style metadata records and the metadata image.
