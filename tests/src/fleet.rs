//! A policy worker, a reviewer service and a runner's client on one in-process transport: what
//! the browser tests drive the reviewer UI with.

use std::time::Duration;

use airlock_client::{Client, ClientConfig, Repeats};
use airlock_reviewer::{ReviewerConfig, Service};
use airlock_transport::MemoryTransport;

use crate::{InProcessWorker, TestKeys};

/// A running worker, reviewer service and client of fleet `prefix`.
pub struct ReviewFleet {
    /// The transport they share.
    pub transport: MemoryTransport,
    /// The reviewer service.
    pub service: Service,
    /// The runner's client.
    pub client: Client<MemoryTransport>,
    /// The service's UI, ending with `/`.
    pub url: String,
    worker: InProcessWorker,
}

impl ReviewFleet {
    /// Starts a worker, the reviewer service `config` describes, and a client, on the fleet of
    /// `config.prefix`, with the test keys.
    pub async fn start(config: ReviewerConfig) -> ReviewFleet {
        let transport = MemoryTransport::new();
        let prefix = config.prefix.clone();
        let worker = InProcessWorker::start(transport.clone(), &prefix, "worker", 8);
        let service = Service::start(transport.clone(), config).await.expect("the reviewer service starts");
        let url = format!("http://{}/", service.local_addr());
        let client_config = ClientConfig {
            prefix,
            runner_id: "runner".into(),
            default_timeout: Duration::from_secs(600),
            replies: TestKeys::get().replies(),
            repeats: Repeats::default(),
        };
        let client = Client::connect(transport.clone(), client_config).await.expect("the client connects");
        ReviewFleet { transport, service, client, url, worker }
    }

    /// Stops the service, the client and the worker.
    pub async fn stop(self) {
        self.service.stop().await;
        self.client.close().await;
        self.worker.stop().await;
    }
}
