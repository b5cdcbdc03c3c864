use super::*;

#[test]
fn core_names_carry_the_prefix() {
    let topology = Topology::new("fleet-a");
    assert_eq!(topology.requests_queue(), "fleet-a.requests");
    assert_eq!(topology.results_queue(), "fleet-a.results");
    assert_eq!(topology.step_queue("monitor"), "fleet-a.step.monitor");
    assert_eq!(topology.human_queue("security"), "fleet-a.human.security");
    assert_eq!(topology.reply_queue("runner-1"), "fleet-a.reply.runner-1");
    assert_eq!(topology.dead_letter_exchange(), "fleet-a.dlx");
    assert_eq!(topology.dead_queue(), "fleet-a.dead");
    assert_eq!(topology.cancels_exchange(), "fleet-a.cancels");
    let queues: Vec<_> = topology.queues().iter().map(|q| q.name.as_str()).collect();
    assert_eq!(queues, ["fleet-a.dead", "fleet-a.requests", "fleet-a.results", "fleet-a.control"]);
    assert_eq!(topology.queues()[3].kind, QueueKind::Log { max_age: CONTROL_MAX_AGE });
    let binding = |exchange: &str, queue: &str, key: &str| Binding {
        exchange: exchange.into(),
        queue: queue.into(),
        routing_key: key.into(),
    };
    assert_eq!(
        topology.bindings(),
        [
            binding("fleet-a.dlx", "fleet-a.dead", ""),
            binding("fleet-a.ask", "fleet-a.requests", "requests"),
            binding("fleet-a.answer", "fleet-a.results", "results"),
            binding("fleet-a.control", "fleet-a.control", ""),
        ]
    );
}

#[test]
fn every_queue_another_role_feeds_has_one_exact_route() {
    let topology = Topology::new("p").with_step("scan").with_human_pool("ops").with_reply_queue("alice.r1");
    for (route, queue) in [
        (topology.requests_route(), "p.requests"),
        (topology.results_route(), "p.results"),
        (topology.step_route("scan"), "p.step.scan"),
        (topology.human_route("ops"), "p.human.ops"),
        (topology.reply_route("p.reply.alice.r1").unwrap(), "p.reply.alice.r1"),
    ] {
        let (exchange, key) = route.parts();
        assert!(route.must_reach_a_queue());
        let bound: Vec<_> =
            topology.bindings().iter().filter(|b| b.exchange == exchange && b.routing_key == key).collect();
        assert_eq!(bound.len(), 1, "{key}");
        assert_eq!(bound[0].queue, queue);
    }
    // Runners, steps and reviewers publish to exchanges that reach one queue each, whatever
    // the key or its copies; only the workers publish to the routing exchange.
    for (route, queue) in [(topology.requests_route(), "p.requests"), (topology.results_route(), "p.results")] {
        let (exchange, _) = route.parts();
        assert!(exchange != topology.route_exchange());
        let fed: Vec<_> = topology.bindings().iter().filter(|b| b.exchange == exchange).collect();
        assert_eq!(fed.len(), 1, "{exchange}");
        assert_eq!(fed[0].queue, queue);
        let kind = topology.exchanges().iter().find(|e| e.name == exchange).map(|e| e.kind);
        assert_eq!(kind, Some(ExchangeKind::Fanout), "{exchange}");
    }
    // Only this fleet's reply queues have a route.
    for queue in ["p.requests", "q.reply.alice", "p.reply.", "p.replyx.a", "p.reply"] {
        assert_eq!(topology.reply_route(queue), None, "{queue}");
    }
}

#[test]
fn work_queues_dead_letter_to_the_fleet_dlx() {
    let topology = Topology::empty("p").with_step("monitor").with_human_pool("default");
    for queue in topology.queues() {
        assert_eq!(
            queue.kind,
            QueueKind::Work { dead_letter_exchange: "p.dlx".into(), delivery_limit: DELIVERY_LIMIT },
            "{}",
            queue.name
        );
    }
}

#[test]
fn adding_twice_keeps_one() {
    let topology = Topology::new("p")
        .with_step("x")
        .with_step("x")
        .with_binding("p.cancels", "p.reply.r", "")
        .with_binding("p.cancels", "p.reply.r", "");
    assert_eq!(topology.queues().iter().filter(|q| q.name == "p.step.x").count(), 1);
    // The dead-letter binding, the requests and results bindings, the control log's, the
    // step's route and the cancels binding.
    assert_eq!(topology.bindings().len(), 6);
}

#[test]
fn a_decisions_queue_takes_every_kind_of_decision_from_the_routing_exchange() {
    let topology = Topology::empty("p").with_decisions_queue("audit");
    let keys: Vec<_> = topology.bindings().iter().map(|b| (b.exchange.as_str(), b.routing_key.as_str())).collect();
    assert_eq!(keys, [("p.route", "approval.*"), ("p.route", "review.*")]);
    assert_eq!(Topology::decision_key("review", "terminate"), "review.terminate");
}

#[test]
fn merge_and_remove() {
    let mut known = Topology::new("p");
    let extra = Topology::empty("p").with_step("x").with_reply_queue("r").with_binding("p.cancels", "p.reply.r", "");
    known.merge(&extra);
    known.merge(&extra);
    assert_eq!(known.queues().len(), 6);
    assert_eq!(known.bindings().len(), 7);
    known.remove(&extra);
    assert_eq!(known, Topology::new("p"));
}
