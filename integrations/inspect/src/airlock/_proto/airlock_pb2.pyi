from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KIND_UNSPECIFIED: _ClassVar[Kind]
    KIND_APPROVAL: _ClassVar[Kind]
    KIND_REVIEW: _ClassVar[Kind]

class DecisionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_KIND_UNSPECIFIED: _ClassVar[DecisionKind]
    DECISION_KIND_APPROVE: _ClassVar[DecisionKind]
    DECISION_KIND_MODIFY: _ClassVar[DecisionKind]
    DECISION_KIND_REJECT: _ClassVar[DecisionKind]
    DECISION_KIND_TERMINATE: _ClassVar[DecisionKind]
    DECISION_KIND_ESCALATE: _ClassVar[DecisionKind]
    DECISION_KIND_CONTINUE: _ClassVar[DecisionKind]

class ControlResponse(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTROL_RESPONSE_NONE: _ClassVar[ControlResponse]
    CONTROL_RESPONSE_HUMAN: _ClassVar[ControlResponse]
    CONTROL_RESPONSE_POLICY: _ClassVar[ControlResponse]
    CONTROL_RESPONSE_TERMINATE: _ClassVar[ControlResponse]
KIND_UNSPECIFIED: Kind
KIND_APPROVAL: Kind
KIND_REVIEW: Kind
DECISION_KIND_UNSPECIFIED: DecisionKind
DECISION_KIND_APPROVE: DecisionKind
DECISION_KIND_MODIFY: DecisionKind
DECISION_KIND_REJECT: DecisionKind
DECISION_KIND_TERMINATE: DecisionKind
DECISION_KIND_ESCALATE: DecisionKind
DECISION_KIND_CONTINUE: DecisionKind
CONTROL_RESPONSE_NONE: ControlResponse
CONTROL_RESPONSE_HUMAN: ControlResponse
CONTROL_RESPONSE_POLICY: ControlResponse
CONTROL_RESPONSE_TERMINATE: ControlResponse

class ToolCall(_message.Message):
    __slots__ = ("id", "function", "arguments_json", "parse_error", "type", "view", "metadata_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    PARSE_ERROR_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    function: str
    arguments_json: str
    parse_error: str
    type: str
    view: ToolCallContent
    metadata_json: str
    def __init__(self, id: _Optional[str] = ..., function: _Optional[str] = ..., arguments_json: _Optional[str] = ..., parse_error: _Optional[str] = ..., type: _Optional[str] = ..., view: _Optional[_Union[ToolCallContent, _Mapping]] = ..., metadata_json: _Optional[str] = ...) -> None: ...

class ToolCallContent(_message.Message):
    __slots__ = ("title", "format", "content")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    title: str
    format: str
    content: str
    def __init__(self, title: _Optional[str] = ..., format: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class ToolCallView(_message.Message):
    __slots__ = ("context", "call")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    context: ToolCallContent
    call: ToolCallContent
    def __init__(self, context: _Optional[_Union[ToolCallContent, _Mapping]] = ..., call: _Optional[_Union[ToolCallContent, _Mapping]] = ...) -> None: ...

class ToolCallError(_message.Message):
    __slots__ = ("type", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    def __init__(self, type: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("role", "text", "tool_calls", "tool_call_id", "function", "error", "id", "raw_json")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RAW_JSON_FIELD_NUMBER: _ClassVar[int]
    role: str
    text: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    function: str
    error: ToolCallError
    id: str
    raw_json: str
    def __init__(self, role: _Optional[str] = ..., text: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., function: _Optional[str] = ..., error: _Optional[_Union[ToolCallError, _Mapping]] = ..., id: _Optional[str] = ..., raw_json: _Optional[str] = ...) -> None: ...

class Origin(_message.Message):
    __slots__ = ("run_id", "eval_id", "task", "sample_id", "epoch", "model", "runner_id", "eval_mode")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EVAL_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    RUNNER_ID_FIELD_NUMBER: _ClassVar[int]
    EVAL_MODE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    eval_id: str
    task: str
    sample_id: str
    epoch: int
    model: str
    runner_id: str
    eval_mode: str
    def __init__(self, run_id: _Optional[str] = ..., eval_id: _Optional[str] = ..., task: _Optional[str] = ..., sample_id: _Optional[str] = ..., epoch: _Optional[int] = ..., model: _Optional[str] = ..., runner_id: _Optional[str] = ..., eval_mode: _Optional[str] = ...) -> None: ...

class CallKey(_message.Message):
    __slots__ = ("run_id", "sample_id", "epoch", "tool_call_id", "tenant")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    sample_id: str
    epoch: int
    tool_call_id: str
    tenant: str
    def __init__(self, run_id: _Optional[str] = ..., sample_id: _Optional[str] = ..., epoch: _Optional[int] = ..., tool_call_id: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class ApprovalRequest(_message.Message):
    __slots__ = ("message", "call", "view", "history", "history_omitted", "generation")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    HISTORY_OMITTED_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    message: str
    call: ToolCall
    view: ToolCallView
    history: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    history_omitted: int
    generation: Generation
    def __init__(self, message: _Optional[str] = ..., call: _Optional[_Union[ToolCall, _Mapping]] = ..., view: _Optional[_Union[ToolCallView, _Mapping]] = ..., history: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., history_omitted: _Optional[int] = ..., generation: _Optional[_Union[Generation, _Mapping]] = ...) -> None: ...

class Generation(_message.Message):
    __slots__ = ("model", "config_json", "tools")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    model: str
    config_json: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolDefinition]
    def __init__(self, model: _Optional[str] = ..., config_json: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolDefinition, _Mapping]]] = ...) -> None: ...

class ToolDefinition(_message.Message):
    __slots__ = ("name", "description", "parameters_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json: _Optional[str] = ...) -> None: ...

class ReviewRequest(_message.Message):
    __slots__ = ("message", "call", "view", "history", "history_omitted", "result", "output")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    HISTORY_OMITTED_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    message: str
    call: ToolCall
    view: ToolCallView
    history: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    history_omitted: int
    result: ChatMessage
    output: str
    def __init__(self, message: _Optional[str] = ..., call: _Optional[_Union[ToolCall, _Mapping]] = ..., view: _Optional[_Union[ToolCallView, _Mapping]] = ..., history: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., history_omitted: _Optional[int] = ..., result: _Optional[_Union[ChatMessage, _Mapping]] = ..., output: _Optional[str] = ...) -> None: ...

class Policy(_message.Message):
    __slots__ = ("inline", "name", "digest")
    INLINE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    inline: str
    name: str
    digest: str
    def __init__(self, inline: _Optional[str] = ..., name: _Optional[str] = ..., digest: _Optional[str] = ...) -> None: ...

class StepAnswer(_message.Message):
    __slots__ = ("step", "approver", "decision", "modified", "explanation", "metadata_json", "decided_by", "started_at_unix_ms", "answered_at_unix_ms", "published_by", "timed_out")
    STEP_FIELD_NUMBER: _ClassVar[int]
    APPROVER_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_BY_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    step: int
    approver: str
    decision: DecisionKind
    modified: ToolCall
    explanation: str
    metadata_json: str
    decided_by: str
    started_at_unix_ms: int
    answered_at_unix_ms: int
    published_by: str
    timed_out: bool
    def __init__(self, step: _Optional[int] = ..., approver: _Optional[str] = ..., decision: _Optional[_Union[DecisionKind, str]] = ..., modified: _Optional[_Union[ToolCall, _Mapping]] = ..., explanation: _Optional[str] = ..., metadata_json: _Optional[str] = ..., decided_by: _Optional[str] = ..., started_at_unix_ms: _Optional[int] = ..., answered_at_unix_ms: _Optional[int] = ..., published_by: _Optional[str] = ..., timed_out: _Optional[bool] = ...) -> None: ...

class ChainState(_message.Message):
    __slots__ = ("next_step", "trail", "governing")
    NEXT_STEP_FIELD_NUMBER: _ClassVar[int]
    TRAIL_FIELD_NUMBER: _ClassVar[int]
    GOVERNING_FIELD_NUMBER: _ClassVar[int]
    next_step: int
    trail: _containers.RepeatedCompositeFieldContainer[StepAnswer]
    governing: Policy
    def __init__(self, next_step: _Optional[int] = ..., trail: _Optional[_Iterable[_Union[StepAnswer, _Mapping]]] = ..., governing: _Optional[_Union[Policy, _Mapping]] = ...) -> None: ...

class Request(_message.Message):
    __slots__ = ("key", "origin", "approval", "review", "policy", "chain", "deadline_unix_ms", "requested_at_unix_ms", "reply_to", "runner_key")
    KEY_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    REVIEW_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    RUNNER_KEY_FIELD_NUMBER: _ClassVar[int]
    key: CallKey
    origin: Origin
    approval: ApprovalRequest
    review: ReviewRequest
    policy: Policy
    chain: ChainState
    deadline_unix_ms: int
    requested_at_unix_ms: int
    reply_to: str
    runner_key: bytes
    def __init__(self, key: _Optional[_Union[CallKey, _Mapping]] = ..., origin: _Optional[_Union[Origin, _Mapping]] = ..., approval: _Optional[_Union[ApprovalRequest, _Mapping]] = ..., review: _Optional[_Union[ReviewRequest, _Mapping]] = ..., policy: _Optional[_Union[Policy, _Mapping]] = ..., chain: _Optional[_Union[ChainState, _Mapping]] = ..., deadline_unix_ms: _Optional[int] = ..., requested_at_unix_ms: _Optional[int] = ..., reply_to: _Optional[str] = ..., runner_key: _Optional[bytes] = ...) -> None: ...

class StepTask(_message.Message):
    __slots__ = ("request", "step", "name", "params_json", "deadline_unix_ms", "on_timeout", "trace_context", "request_digest", "seal", "requested_by")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    ON_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_DIGEST_FIELD_NUMBER: _ClassVar[int]
    SEAL_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    request: Request
    step: int
    name: str
    params_json: str
    deadline_unix_ms: int
    on_timeout: DecisionKind
    trace_context: _containers.ScalarMap[str, str]
    request_digest: bytes
    seal: bytes
    requested_by: str
    def __init__(self, request: _Optional[_Union[Request, _Mapping]] = ..., step: _Optional[int] = ..., name: _Optional[str] = ..., params_json: _Optional[str] = ..., deadline_unix_ms: _Optional[int] = ..., on_timeout: _Optional[_Union[DecisionKind, str]] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., request_digest: _Optional[bytes] = ..., seal: _Optional[bytes] = ..., requested_by: _Optional[str] = ...) -> None: ...

class HumanTask(_message.Message):
    __slots__ = ("task", "choices", "pool", "approvals", "rerouted_from", "reroute_at_unix_ms", "reroute_to", "warn_at_unix_ms")
    TASK_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    REROUTED_FROM_FIELD_NUMBER: _ClassVar[int]
    REROUTE_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    REROUTE_TO_FIELD_NUMBER: _ClassVar[int]
    WARN_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    task: StepTask
    choices: _containers.RepeatedScalarFieldContainer[DecisionKind]
    pool: str
    approvals: int
    rerouted_from: str
    reroute_at_unix_ms: int
    reroute_to: str
    warn_at_unix_ms: int
    def __init__(self, task: _Optional[_Union[StepTask, _Mapping]] = ..., choices: _Optional[_Iterable[_Union[DecisionKind, str]]] = ..., pool: _Optional[str] = ..., approvals: _Optional[int] = ..., rerouted_from: _Optional[str] = ..., reroute_at_unix_ms: _Optional[int] = ..., reroute_to: _Optional[str] = ..., warn_at_unix_ms: _Optional[int] = ...) -> None: ...

class StepResult(_message.Message):
    __slots__ = ("task", "answer", "signer_key_id", "signature")
    TASK_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    SIGNER_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    task: StepTask
    answer: StepAnswer
    signer_key_id: str
    signature: bytes
    def __init__(self, task: _Optional[_Union[StepTask, _Mapping]] = ..., answer: _Optional[_Union[StepAnswer, _Mapping]] = ..., signer_key_id: _Optional[str] = ..., signature: _Optional[bytes] = ...) -> None: ...

class Decision(_message.Message):
    __slots__ = ("decision_id", "key", "kind", "decision", "modified", "explanation", "metadata_json", "approver", "step", "trail", "policy_digest", "decided_by", "requested_at_unix_ms", "decided_at_unix_ms", "origin", "timed_out")
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    APPROVER_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    TRAIL_FIELD_NUMBER: _ClassVar[int]
    POLICY_DIGEST_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    decision_id: str
    key: CallKey
    kind: Kind
    decision: DecisionKind
    modified: ToolCall
    explanation: str
    metadata_json: str
    approver: str
    step: int
    trail: _containers.RepeatedCompositeFieldContainer[StepAnswer]
    policy_digest: str
    decided_by: str
    requested_at_unix_ms: int
    decided_at_unix_ms: int
    origin: Origin
    timed_out: bool
    def __init__(self, decision_id: _Optional[str] = ..., key: _Optional[_Union[CallKey, _Mapping]] = ..., kind: _Optional[_Union[Kind, str]] = ..., decision: _Optional[_Union[DecisionKind, str]] = ..., modified: _Optional[_Union[ToolCall, _Mapping]] = ..., explanation: _Optional[str] = ..., metadata_json: _Optional[str] = ..., approver: _Optional[str] = ..., step: _Optional[int] = ..., trail: _Optional[_Iterable[_Union[StepAnswer, _Mapping]]] = ..., policy_digest: _Optional[str] = ..., decided_by: _Optional[str] = ..., requested_at_unix_ms: _Optional[int] = ..., decided_at_unix_ms: _Optional[int] = ..., origin: _Optional[_Union[Origin, _Mapping]] = ..., timed_out: _Optional[bool] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("key", "code", "message")
    KEY_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    key: CallKey
    code: str
    message: str
    def __init__(self, key: _Optional[_Union[CallKey, _Mapping]] = ..., code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("pool", "task_id", "step", "expires_at_unix_ms")
    POOL_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    pool: str
    task_id: str
    step: int
    expires_at_unix_ms: int
    def __init__(self, pool: _Optional[str] = ..., task_id: _Optional[str] = ..., step: _Optional[int] = ..., expires_at_unix_ms: _Optional[int] = ...) -> None: ...

class ReplyBody(_message.Message):
    __slots__ = ("decision", "error", "progress")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    error: Error
    progress: Progress
    def __init__(self, decision: _Optional[_Union[Decision, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ...) -> None: ...

class Reply(_message.Message):
    __slots__ = ("body", "key_id", "proof")
    BODY_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    key_id: str
    proof: bytes
    def __init__(self, body: _Optional[bytes] = ..., key_id: _Optional[str] = ..., proof: _Optional[bytes] = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ("key", "kind", "reason")
    KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    key: CallKey
    kind: Kind
    reason: str
    def __init__(self, key: _Optional[_Union[CallKey, _Mapping]] = ..., kind: _Optional[_Union[Kind, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class ControlEvent(_message.Message):
    __slots__ = ("at_unix_ms", "by", "run_switch", "incident", "outcome", "score", "joined", "sampled", "beat", "claim")
    AT_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    RUN_SWITCH_FIELD_NUMBER: _ClassVar[int]
    INCIDENT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    JOINED_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_FIELD_NUMBER: _ClassVar[int]
    BEAT_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    at_unix_ms: int
    by: str
    run_switch: RunSwitch
    incident: Incident
    outcome: CallOutcome
    score: StepScore
    joined: Joined
    sampled: SampledAnswer
    beat: LimiterBeat
    claim: SampleClaim
    def __init__(self, at_unix_ms: _Optional[int] = ..., by: _Optional[str] = ..., run_switch: _Optional[_Union[RunSwitch, _Mapping]] = ..., incident: _Optional[_Union[Incident, _Mapping]] = ..., outcome: _Optional[_Union[CallOutcome, _Mapping]] = ..., score: _Optional[_Union[StepScore, _Mapping]] = ..., joined: _Optional[_Union[Joined, _Mapping]] = ..., sampled: _Optional[_Union[SampledAnswer, _Mapping]] = ..., beat: _Optional[_Union[LimiterBeat, _Mapping]] = ..., claim: _Optional[_Union[SampleClaim, _Mapping]] = ...) -> None: ...

class RunRef(_message.Message):
    __slots__ = ("run_id", "tenant")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    tenant: str
    def __init__(self, run_id: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class RunSwitch(_message.Message):
    __slots__ = ("run", "response", "pool", "policy", "reason")
    RUN_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    run: RunRef
    response: ControlResponse
    pool: str
    policy: str
    reason: str
    def __init__(self, run: _Optional[_Union[RunRef, _Mapping]] = ..., response: _Optional[_Union[ControlResponse, str]] = ..., pool: _Optional[str] = ..., policy: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Incident(_message.Message):
    __slots__ = ("key", "marked", "note")
    KEY_FIELD_NUMBER: _ClassVar[int]
    MARKED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    key: CallKey
    marked: str
    note: str
    def __init__(self, key: _Optional[_Union[CallKey, _Mapping]] = ..., marked: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class CallOutcome(_message.Message):
    __slots__ = ("key", "denied")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DENIED_FIELD_NUMBER: _ClassVar[int]
    key: CallKey
    denied: bool
    def __init__(self, key: _Optional[_Union[CallKey, _Mapping]] = ..., denied: _Optional[bool] = ...) -> None: ...

class StepScore(_message.Message):
    __slots__ = ("step", "scope", "score", "audit_budget", "passed")
    STEP_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    AUDIT_BUDGET_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    step: str
    scope: str
    score: float
    audit_budget: float
    passed: bool
    def __init__(self, step: _Optional[str] = ..., scope: _Optional[str] = ..., score: _Optional[float] = ..., audit_budget: _Optional[float] = ..., passed: _Optional[bool] = ...) -> None: ...

class Joined(_message.Message):
    __slots__ = ("nonce",)
    NONCE_FIELD_NUMBER: _ClassVar[int]
    nonce: str
    def __init__(self, nonce: _Optional[str] = ...) -> None: ...

class SampledAnswer(_message.Message):
    __slots__ = ("key", "response")
    KEY_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    response: bytes
    def __init__(self, key: _Optional[bytes] = ..., response: _Optional[bytes] = ...) -> None: ...

class SampleClaim(_message.Message):
    __slots__ = ("key", "until_unix_ms")
    KEY_FIELD_NUMBER: _ClassVar[int]
    UNTIL_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    until_unix_ms: int
    def __init__(self, key: _Optional[bytes] = ..., until_unix_ms: _Optional[int] = ...) -> None: ...

class LimiterBeat(_message.Message):
    __slots__ = ("pause_until_unix_ms",)
    PAUSE_UNTIL_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    pause_until_unix_ms: int
    def __init__(self, pause_until_unix_ms: _Optional[int] = ...) -> None: ...
