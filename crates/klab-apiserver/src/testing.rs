//! One-call API servers for tests: an in-memory store, a virtual clock at the default epoch and a
//! seeded RNG. Build them inside the (paused) runtime that will drive them.

use std::sync::Arc;

use klab_api::{Clock, DetRng};
use klab_store::memory::MemoryStore;

use crate::server::{ApiServer, ApiServerConfig};

/// An API server on a fresh memory store with a virtual clock (use on a paused runtime).
pub async fn memory_server() -> ApiServer {
    memory_server_with(
        Clock::virtual_default(),
        DetRng::seeded(1),
        ApiServerConfig::default(),
    )
    .await
}

/// An API server on a fresh memory store with the given clock, RNG and configuration.
pub async fn memory_server_with(clock: Clock, rng: DetRng, config: ApiServerConfig) -> ApiServer {
    let store: klab_store::DynStorage = MemoryStore::new() as Arc<dyn klab_store::Storage>;
    ApiServer::new(store, clock, rng, config)
        .await
        .expect("bootstrap of an empty memory store cannot fail")
}
