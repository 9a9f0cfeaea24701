// Compiled by test/types.test.js with `tsc --noEmit --strict`; never run.
import {
  ABI_VERSION,
  Ambiguous,
  ApprovalRequired,
  InvalidInput,
  Duplicate,
  FetchFault,
  NotExecuted,
  NotFound,
  OutOfWindow,
  Warden,
  WardenError,
  actionHash,
  canonical,
  extendLease,
  idempotencyToken,
  parseJson,
  stringifyJson,
  withApproval,
  withContext,
} from '../..';
import type {
  ApprovalRecord,
  CheckpointRecord,
  ConsistencyProof,
  CredentialProvider,
  EffectRecord,
  InclusionProof,
  JsonValue,
  ReconcileAnswer,
  Scope,
  ScopedGrant,
  ScopedGrantDone,
  SightCatalog,
  SightDiff,
  SightHistoryPage,
  SightResult,
  SightTool,
  TruncationFlag,
} from '../..';

const version: 1 = ABI_VERSION;
const w = new Warden({ store: 'state.redb', config: 'warden.yaml', environment: 'staging' });

interface RefundArgs {
  payment_id: string;
  amount: number | bigint;
}

const refund = w.protect(
  'stripe.refund',
  async (args: RefundArgs): Promise<{ refund: string }> => {
    const token: string = idempotencyToken();
    const expires: string | null = await extendLease(60_000);
    if (args.amount === 0) throw new NotExecuted('nothing to refund');
    return { refund: `re_${args.payment_id}_${token}_${expires}` };
  },
  {
    reconcile: async (key: string): Promise<ReconcileAnswer> => (key.startsWith('refund:') ? 'unknown' : 'committed'),
    leaseMs: 30_000,
    waitMs: 1_000,
  },
);

async function story(): Promise<void> {
  try {
    const out: { refund: string } = await withContext({ agent: 'support-agent', user: 'ada' }, () =>
      refund({ payment_id: 'pay_1', amount: 2n ** 70n }),
    );
    void out;
  } catch (error) {
    if (error instanceof ApprovalRequired) {
      const id: string = error.requestId;
      const expires: string = error.expiresAt;
      const record: ApprovalRecord = await w.approve(id, { by: 'ops:bob', ttlMs: 60_000 });
      void expires;
      void record;
      const scope: Scope = { uses: 3, minutes: 30, fixed: ['/customer_id'], atMost: { '/amount': 5000 } };
      const done: ScopedGrantDone = await w.approveScoped(id, { by: 'ops:bob', scope });
      const live: ScopedGrant[] = await w.scopedGrants({ liveOnly: true });
      const state: 'live' | 'used_up' | 'expired' | 'revoked' = done.grant.state;
      const ended: ScopedGrantDone = await w.revokeScopedGrant(done.grant.grant_id, { by: 'ops:bob', reason: 'done' });
      void live;
      void state;
      void ended;
      await withApproval(id, () => withContext({ agent: 'support-agent' }, () => refund({ payment_id: 'pay_1', amount: 1 })));
    } else if (error instanceof Duplicate) {
      const state: 'committed' | 'in_progress' = error.state;
      void state;
    } else if (error instanceof Ambiguous) {
      const resolved: EffectRecord = await w.resolve(error.effectKey, 'failed', { by: 'ops:bob' });
      void resolved;
    } else if (error instanceof WardenError) {
      const code: string = error.code;
      const made = new InvalidInput('made here');
      void made;
      const reason: string = error.reason;
      void code;
      void reason;
    }
  }
  const pending: ApprovalRecord[] = await w.pending();
  const denied: ApprovalRecord = await w.deny('apr_x', { by: 'ops:bob', reason: 'no' });
  const effects: EffectRecord[] = await w.effects({ state: 'ambiguous', limit: 10 });
  const effect: EffectRecord | null = await w.effect('refund:pay_1');
  const receipts = await w.receipts({ fromSeq: 0, limit: 10 });
  const chain = await w.verifyChain();
  const events = await w.events({ after: 0, limit: 0 });
  const approval: ApprovalRecord | null = await w.approval('apr_x');
  void [pending, denied, effects, effect, receipts, chain, events, approval];
  const included: InclusionProof = await w.proofInclusion('rct_x', { checkpoint: 2 });
  const consistent: ConsistencyProof = await w.proofConsistency(1, 2);
  const listed: CheckpointRecord[] = await w.checkpoints({ from: 1, limit: 0 });
  const leaf: string = included.leaf_hash;
  const path: string[] = consistent.proof;
  const note: string | undefined = listed[0]?.note;
  void [leaf, path, note, await w.proofInclusion('rct_x'), await w.checkpoints()];
  const hash: string = actionHash({ name: 'stripe.refund', arguments: { amount: 1 }, principal: { agent: 'a' }, environment: 'staging' });
  const text: string = canonical({ a: 1n, b: [null, true, 'x'] });
  const value: JsonValue = parseJson(stringifyJson({ hash, text }));
  void value;
  void version;
  w.close();
}

async function sights(): Promise<void> {
  const reader = new Warden({ store: 'state.redb', config: 'warden.yaml', credentialsDir: '/run/credentials/app' });
  const provider: CredentialProvider = async (reference: string) => (reference === 'STATUS_TOKEN' ? 'tok' : null);
  reader.setCredentialProvider(provider);
  reader.setCredentialProvider((reference) => (reference.length > 0 ? undefined : 'x'));
  reader.setCredentialProvider(null);
  const controller = new AbortController();
  try {
    const result: SightResult = await reader.query('status', 'summary', {
      params: { region: 'eu', limit: 10n },
      fields: ['state'],
      snapshot: true,
      signal: controller.signal,
    });
    const state: JsonValue = result.values.state;
    const redacted: number | undefined = result.redactions.secrets;
    const id: string | undefined = result.snapshotId;
    const longest: number | undefined = result.truncation.state?.strings?.total;
    const cut: TruncationFlag | undefined = result.truncation.state?.items;
    const page: SightHistoryPage = await reader.history('status', 'summary', { params: { region: 'eu' }, limit: 5 });
    const next: SightHistoryPage = await reader.history('status', 'summary', { cursor: page.nextCursor ?? null });
    const diff: SightDiff = await reader.diff(page.snapshots[0].snapshotId, next.snapshots[0].snapshotId);
    const change: 'added' | 'removed' | 'changed' = diff.entries[0].change;
    void [state, redacted, id, change, longest, cut];
  } catch (error) {
    if (error instanceof OutOfWindow || error instanceof FetchFault || error instanceof NotFound) {
      const reason: string = error.reason;
      void reason;
    }
  }
  await reader.query('status', 'summary');
  const catalog: SightCatalog = reader.sources();
  const tools: SightTool[] = reader.toolSchema();
  const fields: string[] = catalog.sources[0].endpoints[0].fields;
  void [tools.map((tool) => tool.input_schema), fields];
  reader.close();
}

void story;
void sights;
