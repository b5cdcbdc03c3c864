//! The wire's proofs, read and made the same way by every side: a reply opened by its runner,
//! a person's answer signed by the reviewer service that recorded it and checked by workers.

use airlock_contract::v1;
use airlock_integrity::{Domain, PublicKeys, ReplyProof, RunnerKeys, Signature, Signing, SigningKey, VerifyError};
use prost::Message as _;

/// Why a runner did not take a reply.
#[derive(Debug, thiserror::Error)]
pub enum ReplyError {
    /// The message is not an `airlock.v1.Reply` (or its body not a `ReplyBody`).
    #[error("not an airlock.v1.Reply: {0}")]
    Malformed(#[from] prost::DecodeError),
    /// The proof does not hold for this runner and request.
    #[error("the reply's proof does not hold: {0}")]
    Unproved(#[from] VerifyError),
    /// The body says nothing.
    #[error("the reply has neither a decision, an error nor a progress")]
    Empty,
}

/// What the `Reply` in `message` says, once its proof holds for `runner`'s keys and the
/// request whose digest is `request_digest`; a runner without keys takes it unproved.
///
/// A [`Progress`](v1::reply_body::Body::Progress) is returned without a proof: the reviewer
/// service that sends it holds no fleet key, and it decides nothing. A caller may tell someone
/// the call waits, but must never settle a call with it nor trust what it names beyond that.
pub fn open_reply(
    message: &[u8],
    runner: Option<&RunnerKeys>,
    request_digest: &[u8; 32],
) -> Result<v1::reply_body::Body, ReplyError> {
    let reply = v1::Reply::decode(message)?;
    let body = v1::ReplyBody::decode(reply.body.as_slice());
    if let Ok(v1::ReplyBody { body: Some(progress @ v1::reply_body::Body::Progress(_)) }) = body {
        return Ok(progress);
    }
    if let Some(runner) = runner {
        runner.verify(request_digest, &reply.body, &ReplyProof::from_wire(&reply.key_id, &reply.proof)?)?;
    }
    body?.body.ok_or(ReplyError::Empty)
}

/// Signs `result`'s answer as the reviewer service holding `key`, bound to its task's seal.
pub fn sign_human_answer(key: &SigningKey, result: &mut v1::StepResult) {
    let (seal, answer) = signed_parts(result);
    let signature = key.sign(Domain::HumanAnswer, &seal, &answer);
    result.signer_key_id = signature.key_id.as_str().to_owned();
    result.signature = signature.bytes.to_vec();
}

/// Checks that `result`'s answer is signed by one of the reviewer services in `reviewers`,
/// for the task it comes with.
pub fn verify_human_answer(reviewers: &PublicKeys<Signing>, result: &v1::StepResult) -> Result<(), VerifyError> {
    let signature = Signature::from_wire(&result.signer_key_id, &result.signature)?;
    let (seal, answer) = signed_parts(result);
    reviewers.verify(Domain::HumanAnswer, &seal, &answer, &signature)
}

/// What a human answer's signature covers: the answer as encoded, bound to the SHA-256 of the
/// task's seal (which covers the request, its chain state and the step).
fn signed_parts(result: &v1::StepResult) -> ([u8; 32], Vec<u8>) {
    let seal = result.task.as_ref().map(|task| task.seal.as_slice()).unwrap_or_default();
    let answer = result.answer.as_ref().map(|answer| answer.encode_to_vec()).unwrap_or_default();
    (airlock_integrity::digest(seal), answer)
}
