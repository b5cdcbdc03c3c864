//! The denominator: a bare request/reply echo on lapin alone, with none of Airlock's code.
//!
//! The durability is the fleet's: durable quorum queues, persistent messages, publisher
//! confirms on both sides, the request acknowledged after its reply is confirmed. The
//! responder (`airlock bench-bare-echo`, its own process) consumes and publishes on one
//! connection; the requester publishes on a confirm channel and reads its reply queue with
//! one reader task that resolves a map of waiters by correlation id.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use tracing::{info, warn};

use super::echo::Waiters;
use super::traffic::{Outcome, Requester};
use crate::commands::{Failure, shutdown_signal};

/// Arguments of `airlock bench-bare-echo`.
#[derive(Debug, Args)]
pub struct BareEchoArgs {
    /// The broker.
    #[arg(long, env = "AIRLOCK_AMQP_URL")]
    amqp: String,
    /// The queue to serve (declared by the requester).
    #[arg(long)]
    queue: String,
    /// Messages handled at once (the consumer's prefetch).
    #[arg(long, default_value_t = 64)]
    concurrency: u16,
}

/// Persistent delivery mode.
const PERSISTENT: u8 = 2;

fn failure(what: &str) -> impl Fn(lapin::Error) -> Failure + '_ {
    move |e| Failure::other(format!("bare echo, {what}: {e}"))
}

/// Serves `queue` until SIGTERM or SIGINT: every message goes back to its `reply_to` queue
/// with its correlation id, and is acknowledged once that is confirmed.
pub async fn serve(args: BareEchoArgs) -> Result<(), Failure> {
    let connection =
        Connection::connect(&args.amqp, ConnectionProperties::default().with_connection_name("bench bare echo".into()))
            .await
            .map_err(failure("connect"))?;
    let consuming = connection.create_channel().await.map_err(failure("channel"))?;
    consuming.basic_qos(args.concurrency, BasicQosOptions::default()).await.map_err(failure("qos"))?;
    let publishing = connection.create_channel().await.map_err(failure("channel"))?;
    publishing.confirm_select(ConfirmSelectOptions::default()).await.map_err(failure("confirms"))?;
    let mut requests = consuming
        .basic_consume(args.queue.as_str().into(), "".into(), BasicConsumeOptions::default(), FieldTable::default())
        .await
        .map_err(failure("consume"))?;
    info!(queue = %args.queue, "Bare echo consuming.");
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            delivery = requests.next() => match delivery {
                Some(Ok(delivery)) => { tokio::spawn(echo(publishing.clone(), delivery)); }
                Some(Err(e)) => return Err(failure("delivery")(e)),
                None => break,
            },
        }
    }
    let _ = connection.close(200, "done".into()).await;
    Ok(())
}

async fn echo(channel: Channel, delivery: lapin::message::Delivery) {
    let properties = &delivery.properties;
    let (Some(reply_to), Some(id)) = (properties.reply_to(), properties.correlation_id()) else {
        warn!("A bare echo request without reply_to or correlation id was dropped.");
        let _ = delivery.acker.nack(BasicNackOptions::default()).await;
        return;
    };
    let reply = BasicProperties::default().with_delivery_mode(PERSISTENT).with_correlation_id(id.clone());
    let published = channel
        .basic_publish("".into(), reply_to.as_str().into(), BasicPublishOptions::default(), &delivery.data, reply)
        .await;
    let confirmed = match published {
        Ok(confirm) => confirm.await.is_ok(),
        Err(_) => false,
    };
    let settled = match confirmed {
        true => delivery.acker.ack(BasicAckOptions::default()).await,
        false => delivery.acker.nack(BasicNackOptions { requeue: true, ..BasicNackOptions::default() }).await,
    };
    if let Err(e) = settled {
        warn!(error = %e, "Bare echo acknowledgement failed.");
    }
}

/// The requesting side of the bare echo: a confirm channel, and one reader of the reply
/// queue.
pub struct BareRequester {
    connection: Connection,
    channel: Channel,
    queue: String,
    reply_queue: String,
    body: Vec<u8>,
    timeout: Duration,
    waiters: Arc<Waiters>,
}

impl BareRequester {
    /// Connects, declares `queue` and the reply queue `reply_queue`, and reads replies.
    pub async fn connect(
        amqp: &str,
        queue: &str,
        reply_queue: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Self, Failure> {
        let properties = ConnectionProperties::default().with_connection_name("bench bare requester".into());
        let connection = Connection::connect(amqp, properties).await.map_err(failure("connect"))?;
        let channel = connection.create_channel().await.map_err(failure("channel"))?;
        let mut quorum = FieldTable::default();
        quorum.insert("x-queue-type".into(), AMQPValue::LongString(LongString::from("quorum")));
        let durable = QueueDeclareOptions::durable();
        channel.queue_declare(queue.into(), durable, quorum.clone()).await.map_err(failure("declare"))?;
        // The reply queue is a quorum queue too, as a runner's is.
        channel.queue_declare(reply_queue.into(), durable, quorum).await.map_err(failure("declare"))?;
        channel.confirm_select(ConfirmSelectOptions::default()).await.map_err(failure("confirms"))?;
        let reading = connection.create_channel().await.map_err(failure("channel"))?;
        let mut replies = reading
            .basic_consume(reply_queue.into(), "".into(), BasicConsumeOptions::default(), FieldTable::default())
            .await
            .map_err(failure("consume"))?;
        let waiters = Arc::new(Waiters::default());
        let reader = Arc::downgrade(&waiters);
        tokio::spawn(async move {
            while let Some(Ok(delivery)) = replies.next().await {
                let Some(waiters) = reader.upgrade() else { break };
                waiters.answer(delivery.properties.correlation_id().as_ref().map(|id| id.as_str()));
                let _ = delivery.acker.ack(BasicAckOptions::default()).await;
            }
        });
        Ok(BareRequester {
            connection,
            channel,
            queue: queue.to_owned(),
            reply_queue: reply_queue.to_owned(),
            body,
            timeout,
            waiters,
        })
    }

    /// Deletes the queues and closes the connection.
    pub async fn finish(&self) {
        for queue in [&self.queue, &self.reply_queue] {
            let _ = self.channel.queue_delete(queue.as_str().into(), Default::default()).await;
        }
        let _ = self.connection.close(200, "done".into()).await;
    }
}

impl Requester for BareRequester {
    async fn call(self: Arc<Self>, run: Arc<str>, index: u64) -> Outcome {
        let id = format!("{run}/{index}");
        let properties = BasicProperties::default()
            .with_delivery_mode(PERSISTENT)
            .with_correlation_id(id.as_str().into())
            .with_reply_to(self.reply_queue.as_str().into());
        let sent = async {
            let options = BasicPublishOptions::default();
            match self
                .channel
                .basic_publish("".into(), self.queue.as_str().into(), options, &self.body, properties)
                .await
            {
                Ok(confirm) => confirm.await.is_ok(),
                Err(_) => false,
            }
        };
        self.waiters.ask(id, self.timeout, sent).await
    }

    fn duplicates(&self) -> u64 {
        self.waiters.ignored()
    }
}
