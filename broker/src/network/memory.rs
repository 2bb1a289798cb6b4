//! `queued.max.request.bytes`: a bound on the memory held by requests that
//! were read and are not handled yet, shared by every connection (Kafka's
//! request memory pool). A connection reserves a frame's size once its
//! prefix arrives, before reading the body, and is not read from while the
//! pool is exhausted; the reservation is returned once the handler lets the
//! connection go on (it has consumed the request, as Kafka releases the
//! request buffer when its handler returns).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Debug)]
pub struct RequestMemory {
    pool: Arc<Semaphore>,
    capacity: usize,
}

impl RequestMemory {
    pub fn new(capacity: usize) -> Arc<Self> {
        let capacity = capacity.clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(Self {
            pool: Arc::new(Semaphore::new(capacity)),
            capacity,
        })
    }

    /// Waits until `len` bytes are free and takes them. A frame larger than
    /// the whole pool takes all of it, so it is read alone rather than never.
    pub async fn reserve(&self, len: usize) -> OwnedSemaphorePermit {
        let wanted = len.clamp(1, self.capacity.min(u32::MAX as usize)) as u32;
        Arc::clone(&self.pool)
            .acquire_many_owned(wanted)
            .await
            .expect("the pool is never closed")
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.capacity - self.pool.available_permits()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn reservations_wait_for_memory_to_be_returned() {
        let memory = RequestMemory::new(1000);
        let first = memory.reserve(600).await;
        assert_eq!(memory.used(), 600);
        let blocked = tokio::time::timeout(Duration::from_millis(50), memory.reserve(600)).await;
        assert!(blocked.is_err(), "the pool had only 400 bytes left");
        drop(first);
        let second = memory.reserve(600).await;
        // A frame larger than the pool waits for all of it, then goes alone.
        let huge = tokio::spawn({
            let memory = Arc::clone(&memory);
            async move { memory.reserve(5000).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!huge.is_finished());
        drop(second);
        let huge = huge.await.unwrap();
        assert_eq!(memory.used(), 1000);
        drop(huge);
        assert_eq!(memory.used(), 0);
    }
}
