-- revision: 0001_baseline
-- written by `python -m sidewatch.store.newstore` from the migrations: do not edit
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
CREATE TABLE answer (
	id INTEGER NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	run_id VARCHAR(256) NOT NULL, 
	interrupt_id VARCHAR(256) NOT NULL, 
	code VARCHAR(16) NOT NULL, 
	digest VARCHAR(128), 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	via VARCHAR(16) DEFAULT 'resume' NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_answer_key UNIQUE (thread_id, run_id, interrupt_id)
);
CREATE TABLE dirty_thread (
	thread_id VARCHAR(256) NOT NULL, 
	mark BIGINT NOT NULL, 
	early BIGINT, 
	PRIMARY KEY (thread_id)
);
CREATE TABLE finding (
	id INTEGER NOT NULL, 
	"key" VARCHAR(64) NOT NULL, 
	rule VARCHAR(64) NOT NULL, 
	thread_id VARCHAR(256), 
	run_id VARCHAR(256), 
	interrupt_id VARCHAR(256), 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE ("key")
);
CREATE TABLE heartbeat (
	id INTEGER NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	run_id VARCHAR(256), 
	handle BOOLEAN, 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	last_at BIGINT NOT NULL, 
	last_seq BIGINT NOT NULL, 
	beats INTEGER NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE interrupt (
	id INTEGER NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	run_id VARCHAR(256) NOT NULL, 
	interrupt_id VARCHAR(256) NOT NULL, 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	reason VARCHAR(256), 
	tool_call_id VARCHAR(256), 
	expires_at BIGINT, 
	digest VARCHAR(128), 
	handle BOOLEAN, 
	request_id VARCHAR(512), 
	action VARCHAR(256), 
	tool_result_receipt BOOLEAN DEFAULT 0 NOT NULL, 
	pruned BOOLEAN DEFAULT 0 NOT NULL, 
	subagent_run_id VARCHAR(256), 
	PRIMARY KEY (id), 
	UNIQUE (thread_id, run_id, interrupt_id)
);
CREATE TABLE lease (
	name VARCHAR(32) NOT NULL, 
	holder VARCHAR(256) NOT NULL, 
	epoch BIGINT NOT NULL, 
	acquired_at BIGINT NOT NULL, 
	expires_at BIGINT NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE legacy_resume (
	id INTEGER NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	run_id VARCHAR(256) NOT NULL, 
	code VARCHAR(16) NOT NULL, 
	digest VARCHAR(128), 
	entries VARCHAR(8192) NOT NULL, 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_legacy_resume_key UNIQUE (thread_id, run_id)
);
CREATE TABLE meta (
	"key" VARCHAR(64) NOT NULL, 
	value VARCHAR(512) NOT NULL, 
	PRIMARY KEY ("key")
);
CREATE TABLE prune_retry (
	thread_id VARCHAR(256) NOT NULL, 
	PRIMARY KEY (thread_id)
);
CREATE TABLE pruned_total (
	counter VARCHAR(32) NOT NULL, 
	"key" VARCHAR(512) NOT NULL, 
	value BIGINT NOT NULL, 
	PRIMARY KEY (counter, "key")
);
CREATE TABLE run_fact (
	id INTEGER NOT NULL, 
	run_id VARCHAR(256) NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	mark VARCHAR(16) NOT NULL, 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_run_fact_key UNIQUE (thread_id, run_id, mark)
);
CREATE TABLE running_total (
	counter VARCHAR(32) NOT NULL, 
	"key" VARCHAR(512) NOT NULL, 
	shard INTEGER NOT NULL, 
	value BIGINT NOT NULL, 
	PRIMARY KEY (counter, "key", shard)
);
CREATE TABLE service_binding (
	id INTEGER NOT NULL, 
	"key" VARCHAR(64) NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	run_id VARCHAR(256), 
	service VARCHAR(256) NOT NULL, 
	instance VARCHAR(256) NOT NULL, 
	durable BOOLEAN NOT NULL, 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE ("key")
);
CREATE TABLE service_heartbeat (
	service VARCHAR(256) NOT NULL, 
	instance VARCHAR(256) NOT NULL, 
	durable BOOLEAN NOT NULL, 
	first_at BIGINT NOT NULL, 
	first_seq BIGINT NOT NULL, 
	last_at BIGINT NOT NULL, 
	last_seq BIGINT NOT NULL, 
	PRIMARY KEY (service, instance)
);
CREATE TABLE service_heartbeat_change (
	id INTEGER NOT NULL, 
	service VARCHAR(256) NOT NULL, 
	instance VARCHAR(256) NOT NULL, 
	durable BOOLEAN NOT NULL, 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_service_change UNIQUE (service, instance, durable)
);
CREATE TABLE settled_wait (
	thread_id VARCHAR(256) NOT NULL, 
	request_id VARCHAR(640) NOT NULL, 
	at BIGINT NOT NULL, 
	evidence BLOB NOT NULL, 
	PRIMARY KEY (thread_id, request_id)
)
 WITHOUT ROWID

;
CREATE TABLE signal (
	id INTEGER NOT NULL, 
	"key" VARCHAR(64) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	request_id VARCHAR(512), 
	thread_id VARCHAR(256), 
	interrupt_id VARCHAR(256), 
	approver_ref VARCHAR(256), 
	delivered BOOLEAN NOT NULL, 
	acknowledged BOOLEAN NOT NULL, 
	code VARCHAR(16), 
	digest VARCHAR(128), 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	channel VARCHAR(64), 
	PRIMARY KEY (id), 
	UNIQUE ("key")
);
CREATE TABLE subagent (
	id INTEGER NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	run_id VARCHAR(256) NOT NULL, 
	subagent_run_id VARCHAR(256) NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	name VARCHAR(256), 
	interrupt_ids VARCHAR(8192) NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_subagent_key UNIQUE (thread_id, run_id, subagent_run_id, state)
);
CREATE TABLE thread_checkpoint (
	thread_id VARCHAR(256) NOT NULL, 
	cut BIGINT NOT NULL, 
	count BIGINT NOT NULL, 
	dangling VARCHAR(16384) NOT NULL, 
	PRIMARY KEY (thread_id)
);
CREATE TABLE tool_call (
	id INTEGER NOT NULL, 
	tool_call_id VARCHAR(256) NOT NULL, 
	run_id VARCHAR(256) NOT NULL, 
	name VARCHAR(256) NOT NULL, 
	digest VARCHAR(128) NOT NULL, 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_tool_call_key UNIQUE (thread_id, run_id, tool_call_id)
);
CREATE TABLE tool_result (
	id INTEGER NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	run_id VARCHAR(256) NOT NULL, 
	tool_call_id VARCHAR(256) NOT NULL, 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_tool_result_key UNIQUE (thread_id, run_id, tool_call_id)
);
CREATE TABLE transition (
	id INTEGER NOT NULL, 
	request_id VARCHAR(640) NOT NULL, 
	from_state VARCHAR(32), 
	to_state VARCHAR(32) NOT NULL, 
	at BIGINT NOT NULL, 
	recorded_at BIGINT NOT NULL, 
	policy VARCHAR(128) NOT NULL, 
	thresholds VARCHAR(512), 
	evidence VARCHAR(4096), 
	thread_id VARCHAR(256) NOT NULL, 
	earlier TEXT, 
	PRIMARY KEY (id)
);
CREATE TABLE unit (
	id INTEGER NOT NULL, 
	source VARCHAR(512) NOT NULL, 
	received_at BIGINT NOT NULL, 
	accepted INTEGER NOT NULL, 
	skipped INTEGER NOT NULL, 
	rejected INTEGER NOT NULL, 
	"key" VARCHAR(192), 
	PRIMARY KEY (id)
);
CREATE TABLE wait_state (
	thread_id VARCHAR(256) NOT NULL, 
	request_id VARCHAR(640) NOT NULL, 
	policy VARCHAR(128) NOT NULL, 
	state VARCHAR(32) NOT NULL, 
	closed BOOLEAN NOT NULL, 
	since BIGINT NOT NULL, 
	due_at BIGINT, 
	requested_at BIGINT NOT NULL, 
	decided_at BIGINT, 
	receipt_at BIGINT, 
	evaluated_at BIGINT NOT NULL, 
	unreported VARCHAR(32) DEFAULT '' NOT NULL, 
	uncertain BOOLEAN DEFAULT 0 NOT NULL, 
	PRIMARY KEY (thread_id, request_id)
);
CREATE TABLE line_count (
	unit_id INTEGER NOT NULL, 
	kind VARCHAR(32) NOT NULL, 
	lines INTEGER NOT NULL, 
	PRIMARY KEY (unit_id, kind), 
	FOREIGN KEY(unit_id) REFERENCES unit (id)
);
CREATE TABLE reject (
	id INTEGER NOT NULL, 
	unit_id INTEGER NOT NULL, 
	line INTEGER NOT NULL, 
	reason VARCHAR(32) NOT NULL, 
	error VARCHAR(300) NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(unit_id) REFERENCES unit (id)
);
CREATE TABLE run_trace (
	id INTEGER NOT NULL, 
	thread_id VARCHAR(256) NOT NULL, 
	run_id VARCHAR(256) NOT NULL, 
	traceparent VARCHAR(55) NOT NULL, 
	tracestate VARCHAR(512), 
	at BIGINT NOT NULL, 
	seq BIGINT NOT NULL, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_run_trace_key UNIQUE (thread_id, run_id)
);
CREATE INDEX ix_answer_thread_at ON answer (thread_id, at);
CREATE INDEX ix_answer_thread_id ON answer (thread_id);
CREATE INDEX ix_finding_thread_at ON finding (thread_id, at);
CREATE INDEX ix_finding_thread_id ON finding (thread_id);
CREATE INDEX ix_heartbeat_at ON heartbeat (at, id);
CREATE INDEX ix_heartbeat_thread_at ON heartbeat (thread_id, at);
CREATE INDEX ix_heartbeat_thread_id ON heartbeat (thread_id);
CREATE INDEX ix_heartbeat_thread_run_at ON heartbeat (thread_id, run_id, at);
CREATE INDEX ix_interrupt_request_id ON interrupt (request_id);
CREATE INDEX ix_interrupt_thread_at ON interrupt (thread_id, at);
CREATE INDEX ix_interrupt_thread_call ON interrupt (thread_id, tool_call_id);
CREATE INDEX ix_interrupt_thread_id ON interrupt (thread_id);
CREATE INDEX ix_interrupt_thread_interrupt ON interrupt (thread_id, interrupt_id);
CREATE INDEX ix_legacy_resume_thread_at ON legacy_resume (thread_id, at);
CREATE INDEX ix_legacy_resume_thread_id ON legacy_resume (thread_id);
CREATE INDEX ix_run_fact_thread_at ON run_fact (thread_id, at);
CREATE INDEX ix_run_fact_thread_id ON run_fact (thread_id);
CREATE INDEX ix_service_binding_service ON service_binding (service, instance);
CREATE INDEX ix_service_binding_thread_id ON service_binding (thread_id);
CREATE INDEX ix_service_binding_thread_run ON service_binding (thread_id, run_id);
CREATE INDEX ix_signal_ref ON signal (thread_id, interrupt_id);
CREATE INDEX ix_signal_request_id ON signal (request_id);
CREATE INDEX ix_signal_thread_at ON signal (thread_id, at);
CREATE INDEX ix_subagent_thread_id ON subagent (thread_id);
CREATE INDEX ix_subagent_thread_invocation ON subagent (thread_id, subagent_run_id);
CREATE INDEX ix_tool_call_thread_at ON tool_call (thread_id, at);
CREATE INDEX ix_tool_call_thread_id ON tool_call (thread_id);
CREATE INDEX ix_tool_call_tool_call_id ON tool_call (tool_call_id);
CREATE INDEX ix_tool_result_thread_at ON tool_result (thread_id, at);
CREATE INDEX ix_tool_result_thread_call ON tool_result (thread_id, tool_call_id);
CREATE INDEX ix_tool_result_thread_id ON tool_result (thread_id);
CREATE INDEX ix_transition_wait ON transition (request_id, thread_id);
CREATE UNIQUE INDEX ix_unit_key ON unit ("key");
CREATE INDEX ix_wait_state_due ON wait_state (due_at);
CREATE INDEX ix_wait_state_open_since ON wait_state (closed, state, since, request_id, thread_id);
CREATE INDEX ix_wait_state_request_id ON wait_state (request_id);
CREATE INDEX ix_reject_unit_id ON reject (unit_id);
