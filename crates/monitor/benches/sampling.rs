//! What a model call costs the monitor with the cache: the key of a request (SHA-256 over its
//! canonical bytes), a call answered from the cache, and a call sent to a model server on the
//! loopback interface, the floor of any real model call (which adds the model's own time, from
//! hundreds of milliseconds up). The request is the monitor's own: the default template over
//! a call with about 4 KB of history.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use airlock_contract::v1;
use airlock_monitor::prompt::{Limits, Prompt, Template};
use airlock_monitor::provider::{Provider, ProviderConfig, ProviderKind, openai};
use airlock_monitor::sampling::{Cache, Draw};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;

/// A chat completion whose content is the monitor's structured verdict.
const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"score\": 2, \"reason\": \"a training run on local data\"}"},"finish_reason":"stop"}]}"#;

/// Serves `ANSWER` to every request, over keep-alive connections.
async fn model_server(listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { return };
        tokio::spawn(async move {
            let mut stream = BufReader::new(stream);
            loop {
                let mut length = 0;
                let mut line = String::new();
                loop {
                    line.clear();
                    if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                if stream.read_exact(&mut body).await.is_err() {
                    return;
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    ANSWER.len()
                );
                if stream.get_mut().write_all(format!("{head}{ANSWER}").as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

fn prompt() -> Prompt {
    let history = (0..8)
        .map(|i| v1::ChatMessage {
            role: if i % 2 == 0 { "user".into() } else { "assistant".into() },
            text: "I will run the training script on the prepared data and report the loss. ".repeat(6),
            ..Default::default()
        })
        .collect();
    let request = v1::Request {
        body: Some(v1::request::Body::Approval(v1::ApprovalRequest {
            call: Some(v1::ToolCall {
                id: "call".into(),
                function: "bash".into(),
                arguments_json: r#"{"cmd": "python3 train.py --epochs 3 --data /workspace/data"}"#.into(),
                r#type: "function".into(),
                ..Default::default()
            }),
            history,
            ..Default::default()
        })),
        ..Default::default()
    };
    let task = v1::StepTask { request: Some(request), name: "monitor".into(), ..Default::default() };
    Template::default().render(&task, Limits::default()).expect("the default template renders")
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    runtime.spawn(model_server(listener));
    let config = ProviderConfig {
        kind: ProviderKind::OpenAi,
        base_url,
        model: "m".into(),
        api_key: None,
        structured: true,
        max_tokens: None,
        temperature: Some(0.0),
    };
    let prompt = prompt();
    let body = openai::request_body(&config, &prompt);
    println!("request body: {} bytes", body.to_string().len());
    let cached = Provider::new(config.clone()).unwrap().with_cache(Arc::new(Cache::new(10_000, Arc::default())));
    let uncached = Provider::new(config).unwrap();
    let timeout = Duration::from_secs(10);
    let ask = |runtime: &Runtime, provider: &Provider, draw| {
        runtime.block_on(provider.ask(&prompt, draw, timeout)).expect("a score")
    };
    ask(&runtime, &cached, Draw::default());

    let mut group = c.benchmark_group("sampling");
    group.bench_function("key", |b| b.iter(|| black_box(cached.key(black_box(&body), Draw::default()))));
    group.bench_function("ask/cache hit", |b| b.iter(|| black_box(ask(&runtime, &cached, Draw::default()))));
    let mut index = 0;
    group.bench_function("ask/cache miss, loopback model", |b| {
        b.iter(|| {
            index += 1;
            black_box(ask(&runtime, &cached, Draw { epoch: None, index }))
        })
    });
    group.bench_function("ask/no cache, loopback model", |b| {
        b.iter(|| black_box(ask(&runtime, &uncached, Draw::default())))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
