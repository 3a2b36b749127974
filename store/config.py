"""Configuration models of the memory store; `consumer.settings` nests `MemoryConfig`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, PositiveFloat, SecretStr, model_validator

_DAY_S = 86_400.0


class RankingConfig(BaseModel):
    """Weights and thresholds of recall ranking (see `store.relevance.rank`)."""

    w_semantic: float = Field(0.45, ge=0.0, description="Weight of cosine similarity of the error texts.")
    w_lexical: float = Field(0.30, ge=0.0, description="Weight of exact identifier matches.")
    w_recency: float = Field(0.10, ge=0.0, description="Weight of recency (half-life decay).")
    w_trust: float = Field(0.10, ge=0.0, description="Weight of the analyzer's trust.")
    w_feedback: float = Field(0.05, ge=0.0, description="Weight of human feedback (squashed to -1..1).")
    recency_half_life_s: float = Field(14 * _DAY_S, gt=0.0)
    min_score: float = Field(0.35, description="Cases scoring below this are not recalled.")
    dedup_cosine: float = Field(0.98, le=1.0, description="Cases this similar to a better one are dropped.")
    top_k: int = Field(5, ge=0, description="Most cases injected into one prompt.")
    budget_chars: int = Field(6000, ge=0, description="Most characters of recalled text in one prompt.")
    candidate_pool: int = Field(50, ge=1, description="Nearest neighbours fetched before ranking.")

    @model_validator(mode="after")
    def _recallable(self) -> RankingConfig:
        """A `min_score` at or above the best score the weights allow would never recall anything."""
        best = self.w_semantic + self.w_lexical + self.w_recency + self.w_trust + self.w_feedback
        if self.min_score >= best:
            raise ValueError(f"min_score {self.min_score} is not below the best score the weights allow "
                             f"({best:g}): nothing would ever be recalled")
        return self


class TrustWeights(BaseModel):
    """How much a stored case is trusted, by who produced it."""

    human: float = Field(1.0, ge=0.0, le=1.0, description="Confirmed correct by a person.")
    llm: float = Field(0.7, ge=0.0, le=1.0)
    heuristic: float = Field(0.4, ge=0.0, le=1.0)
    wrong_factor: float = Field(0.5, ge=0.0, le=1.0, description=(
        "On 'wrong', trust becomes this times the lower of its trust and its trust before any verdict."))

    def for_analyzer(self, analyzer: str) -> float:
        """Trust of a fresh case; unknown analyzers get the lowest (heuristic) weight."""
        return {"human": self.human, "llm": self.llm}.get(analyzer, self.heuristic)


class StorageConfig(BaseModel):
    """Object-store options for an `s3://` memory shared by replicas; unused for a local directory."""

    endpoint: str | None = None
    region: str | None = None
    allow_http: bool = False
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    extra: dict[str, str] = Field(default_factory=dict, description="Passed to LanceDB as-is.")

    def to_storage_options(self) -> dict[str, str]:
        """The LanceDB/object_store `storage_options` mapping (secrets revealed only here)."""
        options = dict(self.extra)
        if self.endpoint:
            options["aws_endpoint"] = self.endpoint
        if self.region:
            options["aws_region"] = self.region
        if self.allow_http:
            options["allow_http"] = "true"
        if self.access_key_id is not None:
            options["aws_access_key_id"] = self.access_key_id.get_secret_value()
        if self.secret_access_key is not None:
            options["aws_secret_access_key"] = self.secret_access_key.get_secret_value()
        if self.session_token is not None:
            options["aws_session_token"] = self.session_token.get_secret_value()
        return options


class MemoryConfig(BaseModel):
    """The error memory: where it lives, how long cases live, and how they are recalled."""

    uri: str = Field("memory", description="Local directory or s3://bucket/prefix; the caller fills "
                     "'<data_dir>/memory'.")
    storage: StorageConfig = Field(default_factory=StorageConfig)
    ttl_s: dict[str, PositiveFloat] = Field(default_factory=lambda: {"default": 30 * _DAY_S},
                                    description="Time to live per scope; 'default' for other scopes.")
    max_age_s: dict[str, PositiveFloat] = Field(default_factory=lambda: {"default": 14 * _DAY_S},
                                        description="Older cases are stale, per scope (below the TTL, or no "
                                                    "case lives to be stale).")
    trust: TrustWeights = Field(default_factory=TrustWeights)
    ranking: RankingConfig = Field(default_factory=RankingConfig)
    drop_stale: bool = Field(False, description="Drop stale cases from recall instead of marking them.")
    forget_on_wrong: bool = Field(False, description="Delete a case on a 'wrong' verdict.")
    index_min_rows: int = Field(5_000, ge=1, description="Build the vector index past this many rows "
                                "(sqrt(rows) partitions, rebuilt when the table has grown fourfold).")
    scalar_index_min_rows: int = Field(5_000, ge=1, description="Build the indexes on id, tenant, scope, "
                                       "server, fingerprint and expires_at past this many rows.")
    nprobes: int = Field(10, ge=1, description="Fewest IVF partitions a recall searches (more when the "
                         "filter leaves too few rows in them); higher is slower and closer to exact.")
    read_consistency_s: float = Field(0.0, ge=0.0, description="Most seconds a read may lag commits of "
                                      "other replicas/processes (a store sees its own at once); 0 re-checks "
                                      "the table version on every read (one listing per read, costly on "
                                      "object stores).")
    embedder: Literal["onnx", "ollama"] = "onnx"
    ollama_url: str = "http://127.0.0.1:11434"
    ollama_model: str = "all-minilm"
    ollama_timeout_s: float = 30.0
    visible_timeout_s: float = Field(10.0, gt=0.0, description="Most time remember() waits to see its row.")
    commit_retries: int = Field(8, ge=0, description="Retries of a write that lost a commit race.")
    retry_base_s: float = Field(0.05, gt=0.0)
    retry_max_s: float = Field(2.0, gt=0.0)

    def ttl_for(self, scope: str) -> float:
        """Seconds a case of `scope` lives."""
        return self.ttl_s.get(scope, self.ttl_s.get("default", 30 * _DAY_S))

    def max_age_for(self, scope: str) -> float:
        """Age in seconds past which a case of `scope` is stale."""
        return self.max_age_s.get(scope, self.max_age_s.get("default", 14 * _DAY_S))
