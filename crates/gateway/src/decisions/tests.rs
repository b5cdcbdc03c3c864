use super::*;

fn owner(name: &str) -> Arc<str> {
    Arc::from(name)
}

fn refused() -> Outcome {
    Outcome::Refused(Refusal { code: "unknown_policy".into(), message: "no".into() })
}

#[tokio::test(start_paused = true)]
async fn a_retry_joins_its_record_and_sees_its_outcome() {
    let decisions = Decisions::new(Duration::from_secs(60), Quota::default());
    let Opened::New { id, mut watch } = decisions.open(&owner("a"), "k".into(), [1; 32], 1).await.unwrap() else {
        panic!("new")
    };
    let Opened::Existing { id: again, watch: mut joined } =
        decisions.open(&owner("a"), "k".into(), [1; 32], 1).await.unwrap()
    else {
        panic!("existing")
    };
    assert_eq!(id, again);
    decisions.settle(&id, refused()).await;
    assert_eq!(watch.wait_for(Option::is_some).await.unwrap().as_deref(), Some(&refused()));
    assert_eq!(joined.wait_for(Option::is_some).await.unwrap().as_deref(), Some(&refused()));
}

#[tokio::test]
async fn keys_belong_to_their_owner_and_to_one_content() {
    let decisions = Decisions::new(Duration::from_secs(60), Quota::default());
    let Opened::New { id, .. } = decisions.open(&owner("a"), "k".into(), [1; 32], 1).await.unwrap() else {
        panic!("new")
    };
    assert!(matches!(decisions.open(&owner("b"), "k".into(), [1; 32], 1).await.unwrap(), Opened::New { .. }));
    assert!(matches!(decisions.open(&owner("a"), "k".into(), [2; 32], 1).await.unwrap(), Opened::Mismatch));
    assert!(decisions.watch("a", &id).is_some());
    assert!(decisions.watch("b", &id).is_none(), "another caller cannot read it");
    assert!(decisions.watch("a", "nope").is_none());
}

#[tokio::test]
async fn a_caller_past_its_quota_is_refused_until_a_record_settles_and_others_are_not() {
    let decisions = Decisions::new(Duration::from_secs(60), Quota { requests: 2, bytes: 100 });
    let Opened::New { id: first, .. } = open(&decisions, "a", "k1", 10).await else { panic!("new") };
    let Opened::New { id: second, .. } = open(&decisions, "a", "k2", 80).await else { panic!("new") };
    assert_eq!(full(open(&decisions, "a", "k3", 1).await), Full::Requests { limit: 2 });
    assert!(matches!(open(&decisions, "a", "k1", 10).await, Opened::Existing { .. }), "a retry joins its record");
    assert!(matches!(open(&decisions, "b", "k3", 100).await, Opened::New { .. }), "another caller has its own");
    decisions.settle(&first, refused()).await;
    assert_eq!(full(open(&decisions, "a", "k3", 21).await), Full::Bytes { pending: 80, size: 21, limit: 100 });
    assert!(matches!(open(&decisions, "a", "k3", 20).await, Opened::New { .. }));
    decisions.settle(&second, refused()).await;
    decisions.settle(&second, refused()).await;
    assert!(matches!(open(&decisions, "a", "k4", 80).await, Opened::New { .. }), "a record settles once");
    assert_eq!(full(open(&decisions, "a", "k5", 1).await), Full::Requests { limit: 2 });
}

async fn open(decisions: &Decisions, who: &str, key: &str, size: usize) -> Opened {
    decisions.open(&owner(who), key.into(), [1; 32], size).await.unwrap()
}

fn full(opened: Opened) -> Full {
    match opened {
        Opened::Full(full) => full,
        other => panic!("expected a full quota, got {other:?}"),
    }
}

#[tokio::test]
async fn a_failure_frees_the_key_for_a_new_attempt() {
    let decisions = Decisions::new(Duration::from_secs(60), Quota::default());
    let Opened::New { id, .. } = decisions.open(&owner("a"), "k".into(), [1; 32], 1).await.unwrap() else {
        panic!("new")
    };
    decisions.settle(&id, Outcome::Failed(Failure::Unavailable("down".into()))).await;
    let Opened::New { id: second, .. } = decisions.open(&owner("a"), "k".into(), [1; 32], 1).await.unwrap() else {
        panic!("new")
    };
    assert_ne!(id, second);
    assert!(decisions.watch("a", &id).is_some(), "the failed record still answers its id");
}

#[tokio::test(start_paused = true)]
async fn settled_records_are_forgotten_after_the_retention_and_pending_ones_are_not() {
    let decisions = Arc::new(Decisions::new(Duration::from_secs(60), Quota::default()));
    let purger = tokio::spawn({
        let decisions = decisions.clone();
        async move { decisions.purge().await }
    });
    let Opened::New { id, .. } = decisions.open(&owner("a"), "k".into(), [1; 32], 1).await.unwrap() else {
        panic!("new")
    };
    let Opened::New { id: pending, .. } = decisions.open(&owner("a"), "p".into(), [1; 32], 1).await.unwrap() else {
        panic!("new")
    };
    decisions.settle(&id, refused()).await;
    tokio::time::sleep(Duration::from_secs(59)).await;
    assert!(decisions.watch("a", &id).is_some());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(decisions.watch("a", &id).is_none());
    assert!(decisions.watch("a", &pending).is_some());
    assert!(matches!(decisions.open(&owner("a"), "k".into(), [1; 32], 1).await.unwrap(), Opened::New { .. }));
    purger.abort();
}

fn approved() -> Outcome {
    let decision = airlock_contract::v1::Decision {
        decision_id: "d-1".into(),
        decision: airlock_contract::v1::DecisionKind::Approve.into(),
        approver: "auto".into(),
        ..Default::default()
    };
    Outcome::Decided(Box::new(DecisionView::from_wire(&decision)))
}

#[tokio::test]
async fn a_restarted_gateway_reads_its_records_and_keys_back_and_fails_those_left_pending() {
    let file = crate::webhook::log::tests::TempLog::new();
    let store = Store::open(&file.0).await.unwrap();
    let decisions = Decisions::restore(Duration::from_secs(3600), Quota::default(), store).await.unwrap();
    let Opened::New { id: decided, .. } = decisions.open(&owner("a"), "k1".into(), [1; 32], 1).await.unwrap() else {
        panic!("new")
    };
    let Opened::New { id: refusal, .. } = decisions.open(&owner("a"), "k2".into(), [2; 32], 1).await.unwrap() else {
        panic!("new")
    };
    let Opened::New { id: pending, .. } = decisions.open(&owner("b"), "k3".into(), [3; 32], 1).await.unwrap() else {
        panic!("new")
    };
    decisions.settle(&decided, approved()).await;
    decisions.settle(&refusal, refused()).await;
    assert!(Store::open(&file.0).await.is_err(), "a store in use cannot be opened by another gateway");
    decisions.close().await;

    let restarted =
        Decisions::restore(Duration::from_secs(3600), Quota::default(), Store::open(&file.0).await.unwrap())
            .await
            .unwrap();
    assert_eq!(restarted.len(), 3);
    let outcome = |id: &str, owner: &str| restarted.watch(owner, id).and_then(|w| w.borrow().as_deref().cloned());
    assert_eq!(outcome(&decided, "a"), Some(approved()));
    assert_eq!(outcome(&refusal, "a"), Some(refused()));
    assert_eq!(outcome(&pending, "b"), Some(Outcome::Failed(Failure::Restarted)));
    assert_eq!(outcome(&decided, "b"), None, "still only its owner's");
    // A retry finds its record under its key, and a different request under it is refused.
    let Opened::Existing { id, .. } = restarted.open(&owner("a"), "k1".into(), [1; 32], 1).await.unwrap() else {
        panic!("existing")
    };
    assert_eq!(id, decided);
    assert!(matches!(restarted.open(&owner("a"), "k2".into(), [9; 32], 1).await.unwrap(), Opened::Mismatch));
    // The record left pending freed its key: a retry asks again.
    let Opened::New { id: again, .. } = restarted.open(&owner("b"), "k3".into(), [3; 32], 1).await.unwrap() else {
        panic!("new")
    };
    assert_ne!(again, pending);
    restarted.close().await;

    // Past their retention, the settled records are gone from the store too; the one just opened stays.
    let expired =
        Decisions::restore(Duration::ZERO, Quota::default(), Store::open(&file.0).await.unwrap()).await.unwrap();
    assert!(expired.watch("a", &decided).is_none());
    assert!(expired.watch("b", &again).is_some());
    expired.close().await;
    let store = Store::open(&file.0).await.unwrap();
    let left: Vec<String> = store.all().await.unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(left, vec![again], "deleted from the file, not only forgotten");
    store.close().await;
}
