//! Integration, interoperability and fault tests live under `tests/tests/`.
