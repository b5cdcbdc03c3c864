//! A policy worker, a reviewer service and a runner's client on one in-process transport: what
//! the browser tests drive the reviewer UI with.

use std::time::Duration;

use airlock_client::{Client, ClientConfig};
use airlock_reviewer::{ReviewerConfig, Service};
use airlock_transport::MemoryTransport;
use airlock_worker::WorkerConfig;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::TestKeys;

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
    stop_worker: oneshot::Sender<()>,
    worker: JoinHandle<Result<(), airlock_worker::WorkerError>>,
}

impl ReviewFleet {
    /// Starts a worker, the reviewer service `config` describes, and a client, on the fleet of
    /// `config.prefix`, with the test keys.
    pub async fn start(config: ReviewerConfig) -> ReviewFleet {
        let transport = MemoryTransport::new();
        let prefix = config.prefix.clone();
        let (stop_worker, stopped) = oneshot::channel::<()>();
        let worker_config = WorkerConfig {
            prefix: prefix.clone(),
            concurrency: 8,
            policy_dir: None,
            worker_id: "worker".into(),
            metrics: Default::default(),
            trust: TestKeys::get().trust(),
        };
        let worker = tokio::spawn(airlock_worker::run(transport.clone(), worker_config, async {
            let _ = stopped.await;
        }));
        let service = Service::start(transport.clone(), config).await.expect("the reviewer service starts");
        let url = format!("http://{}/", service.local_addr());
        let client_config = ClientConfig {
            prefix,
            runner_id: "runner".into(),
            default_timeout: Duration::from_secs(600),
            fleet_keys: TestKeys::get().fleet_public(),
        };
        let client = Client::connect(transport.clone(), client_config).await.expect("the client connects");
        ReviewFleet { transport, service, client, url, stop_worker, worker }
    }

    /// Stops the service, the client and the worker.
    pub async fn stop(self) {
        self.service.stop().await;
        self.client.close().await;
        let _ = self.stop_worker.send(());
        self.worker.await.expect("the worker task").expect("the worker stops cleanly");
    }
}
