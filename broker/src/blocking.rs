//! Synchronous work (that may wait on the controller or the disk) kept off
//! the runtime's workers: a worker never blocks.

use std::sync::Arc;

/// Runs `f` on the blocking pool, with its own handle on `state`.
pub(crate) async fn blocking<S: Send + Sync + 'static, T: Send + 'static>(
    state: &Arc<S>,
    f: impl FnOnce(&S) -> T + Send + 'static,
) -> anyhow::Result<T> {
    let state = state.clone();
    Ok(tokio::task::spawn_blocking(move || f(&state)).await?)
}
