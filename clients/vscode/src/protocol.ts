// The codeloupe requests this client sends, typed after docs/protocol.md (the server contract).
import { Location, ProgressToken, Range, RequestType } from 'vscode-languageclient/node';

export type DocsMode = 'code' | 'docs' | 'both';

export interface Snippet {
    text: string;
    /** 0-based line of the snippet's first line. */
    startLine: number;
    /** 0-based line the snippet is centred on (the best-matching line). */
    anchorLine: number;
    truncated: boolean;
    /** The innermost definition holding `anchorLine` ("" outside every definition); older servers omit it. */
    anchorSymbol?: string;
}

export interface ChunkResult {
    location: Location;
    score: number;
    kind: string;
    name: string;
    breadcrumb: string;
    symbols: string[];
    lanes: Record<string, number>;
    /** Verbatim chunk text for CORE chunks; "" in RELATED. */
    text: string;
    snippet?: Snippet;
}

export interface FileResult {
    uri: string;
    path: string;
    rank: number;
    score: number;
    language: string;
    why: string;
    /** How the file joined the bundle: ranked by search, or appended by a graph edge, as an entry point, or
     * cited by a cached answer (a flow). */
    via: 'search' | 'graph' | 'entry' | 'flow' | string;
    symbols: string[];
    location: Location;
    chunks: ChunkResult[];
    /** A candidate past every lane's short list and the limit: a map line with no chunks, after the rest. */
    tail?: boolean;
    /** A search over several folders or repositories: the one the file is in ("" or absent otherwise). */
    repository?: string;
}

/** A file's path as the user reads it: `repository:path` when the answer spans several folders or repositories
 * (two folders may both hold `src/index.ts`), else its path. */
export function shownPath(file: FileResult): string {
    return file.repository ? `${file.repository}:${file.path}` : file.path;
}

export interface LaneStatus {
    name: string;
    ready: boolean;
    coverage: number;
    note: string;
    /** Not ready by the user's choice (the dense lane with `embedProvider: none`), not pending. */
    off?: boolean;
}

export interface SearchResult {
    query: string;
    /** Sentences on how far to trust this answer (a partial lane, no good match); older servers omit it. */
    notes?: string[];
    issueMode: boolean;
    mode: string;
    core: FileResult[];
    related: FileResult[];
    lanes: LaneStatus[];
    timingMs: Record<string, number>;
}

export interface SearchParams {
    query: string;
    scope?: string;
    docs?: DocsMode;
    limit?: number;
    folderUri?: string;
}

export const SearchRequest = new RequestType<SearchParams, SearchResult, void>('codeloupe/search');

/** `codeloupe/read`: a shared-index document's text, pinned to the commit its URI names. */
export interface ReadResult {
    uri: string;
    repository: string;
    path: string;
    revision: string;
    text: string;
}

export const ReadRequest = new RequestType<{ uri: string }, ReadResult, void>('codeloupe/read');

export interface Citation {
    k: number;
    location: Location;
    path: string;
    /** 1-based, inclusive. */
    startLine: number;
    /** 1-based, inclusive. */
    endLine: number;
    text: string;
}

/** One part of a narrated answer (docs/protocol.md): plain text, except `code` (verbatim from disk); `ref` and
 * `code` carry their span. */
export interface AnswerPart {
    kind: 'prose' | 'heading' | 'note' | 'ref' | 'code' | string;
    text: string;
    path?: string;
    startLine?: number;
    endLine?: number;
    language?: string;
    location?: Location;
    /** `code` only: its file changed on disk since indexing, and the cited lines were found again by their content
     * (older servers omit it). */
    changed?: boolean;
}

/** What a view says under a `code` part whose `changed` is true (the words of the answer's markdown caption). */
export const CHANGED_ON_DISK = '(changed on disk since indexing: lines re-located)';

export interface AskResult {
    answer: string;
    /** The answer in reading order; older servers omit it (then `answer` is rendered as markdown). */
    parts?: AnswerPart[];
    citations: Citation[];
    uncited: FileResult[];
    abstained: boolean;
    fallback: string | null;
    bundle: SearchResult;
    /** What the flow cache did for this answer; null (or absent on older servers) when nothing. */
    flow?: FlowUse | null;
}

export interface FlowUse {
    /** `served`: the cached answer itself, no model call; `attached`: the model saw it as background. */
    action: 'served' | 'attached' | string;
    flow_id: number;
    /** The cached question. */
    question: string;
    similarity: number;
    coverage: number;
}

/** One cached answer of `codeloupe/flows`. */
export interface CachedFlow {
    id: string;
    question: string;
    mode: string;
    created: number;
    served: number;
    /** A cited file changed since: never served until re-asked. */
    stale: boolean;
    files: { path: string; uri: string }[];
    folderUri: string;
}

export const FlowsRequest = new RequestType<{ folderUri?: string }, { flows: CachedFlow[] }, void>('codeloupe/flows');

export interface TourEntryPoint {
    path: string;
    kind: 'manifest' | 'main guard' | 'main function' | 'shebang' | string;
    detail: string;
    location: Location;
}

export interface TourStop {
    name: string;
    kind: string;
    path: string;
    /** How many other files' text holds the name: mentions, not uses. */
    mentions: number;
    definitions: number;
    location: Location;
}

export interface TourResult {
    /** The strongest entry points: 30, or as many as `entryPoints` asked for. */
    entryPoints: TourEntryPoint[];
    /** Entry points past that count, the weakest signals. */
    entryPointsNotShown: number;
    stops: TourStop[];
    names: number;
}

/** The most entry points `codeloupe/tour` lists on request (its `entryPoints` param takes 1-500). */
export const MAX_TOUR_ENTRY_POINTS = 500;

export const TourRequest = new RequestType<{ limit?: number; entryPoints?: number; folderUri?: string }, TourResult, void>('codeloupe/tour');

export interface RelatedChunk {
    location: Location;
    path: string;
    score: number;
    kind: string;
    name: string;
    breadcrumb: string;
    text: string;
}

export interface RelatedResult {
    uri: string;
    range: Range;
    language: string;
    lane: 'dense' | 'lexical' | string;
    chunks: RelatedChunk[];
}

export const RelatedRequest = new RequestType<{ uri: string; range?: Range; limit?: number }, RelatedResult, void>('codeloupe/related');

export interface AskParams {
    query: string;
    docs?: DocsMode;
    agents?: boolean;
    folderUri?: string;
    workDoneToken?: ProgressToken;
}

export const AskRequest = new RequestType<AskParams, AskResult, void>('codeloupe/ask');

/** One `$/progress` report of an ask: `report.message` carries one of these as JSON. */
export interface AskEvent {
    type: 'retrieval' | 'flow' | 'rerank' | 'plan' | 'agent' | 'delta' | 'citation' | 'fallback' | 'done' | string;
    [field: string]: unknown;
}

/** What `codeloupe/status` says of any index: a folder's or a shared repository's. */
export interface IndexCounts {
    files: number;
    chunks: number;
    symbols: number;
    vectors: { done: number; total: number };
    languages: Record<string, number>;
    provider: string;
    model: string;
    indexPath: string;
    /** Files skipped for their content, by reason (`codeloupe stats PATH --skipped` lists them). */
    skipped?: Record<string, number>;
}

export interface FolderStatus extends IndexCounts {
    uri: string;
    root: string;
    state: 'indexing' | 'ready' | 'error' | string;
    /** The client's workspace trust at start, or the user's `codeloupe trust` now. */
    trusted: boolean;
    message: string;
}

/** A repository of the shared index the server opened (settings `codeloupe.store.*`), with no checkout. */
export interface RepositoryStatus extends IndexCounts {
    uri: string;
    repository: string;
    commit: string;
}

export interface StatusResult {
    folders: FolderStatus[];
    /** Absent from servers before the shared index's editor support. */
    repositories?: RepositoryStatus[];
}

export const StatusRequest = new RequestType<Record<string, never>, StatusResult, void>('codeloupe/status');

export interface GraphNode {
    path: string;
    uri: string;
    community: number | string;
    degree: number;
    god: boolean;
}

export interface GraphMapResult {
    nodes: GraphNode[];
    edges: { source: string; target: string; kind: string; weight: number }[];
    communities: { id: number | string; name: string; size: number; members: string[] }[];
    html?: string;
}

export interface GraphParams {
    mode: 'map' | 'node' | 'path';
    node?: string;
    from?: string;
    to?: string;
    html?: boolean;
    folderUri?: string;
}

export const GraphRequest = new RequestType<GraphParams, GraphMapResult, void>('codeloupe/graph');

/** A file one node uses or is used by; `line` (1-based) is where the using file imports or first calls it. */
export interface GraphNeighbour {
    path: string;
    uri: string;
    kind: string;
    symbols: string[];
    /** In the file that uses the other: this node's for `imports`, the neighbour's for `importers`. */
    line?: number;
    /** Where the use is (`line` in the file that holds it); absent from servers before it. */
    use?: Location;
}

export interface GraphNodeResult {
    found?: true;
    path: string;
    uri: string;
    community: number | string;
    communityName?: string;
    god: boolean;
    imports: GraphNeighbour[];
    importers: GraphNeighbour[];
    external?: string[];
    semantic: { path: string; uri: string; cosine: number }[];
    symbols: string[];
    chunks: { location: Location; text: string }[];
}

/** `codeloupe/graph` node for a file the graph does not hold (a README, a path that does not exist). */
export interface GraphNodeMiss {
    found: false;
    node: string;
    message: string;
    suggestions: { path: string; uri: string }[];
}

/** A file of a folder's part of the graph. */
export interface GraphFolderFile {
    path: string;
    uri: string;
    language: string;
    community: number | string;
    communityName: string;
    degree: number;
    inDegree: number;
    outDegree: number;
    god: boolean;
}

/** An edge across a folder's boundary: `path`/`uri` name the file outside; `use` is where the using file uses the
 * other (the inside file for `uses`, the outside one for `usedBy`). */
export interface GraphFolderEdge extends GraphNeighbour {
    use: Location;
}

/** `codeloupe/graph` node for a folder: its files, the edges across it, the communities its files are in. */
export interface GraphFolderResult {
    found: true;
    folder: string;
    uri: string;
    files: GraphFolderFile[];
    uses: (GraphFolderEdge & { from: string })[];
    usedBy: (GraphFolderEdge & { to: string })[];
    communities: { id: number | string; name: string; size: number; members: string[] }[];
}

export function isGraphFolder(answer: GraphNodeResult | GraphNodeMiss | GraphFolderResult): answer is GraphFolderResult {
    return 'folder' in answer && typeof answer.folder === 'string';
}

export interface GraphHop {
    source: string;
    target: string;
    kind: string;
    /** `uses`: source uses target; `used-by`: target uses source; `similar`: read alike (docs/protocol.md). */
    direction?: 'uses' | 'used-by' | 'similar' | string;
    carriers: string[];
    use?: Location;
    definition?: Location;
    cosine?: number;
    /** The use site's and the definition's lines, verbatim from disk; absent when the file changed since indexing. */
    useCode?: HopCode;
    definitionCode?: HopCode;
}

export interface HopCode {
    location: Location;
    text: string;
    symbol: string;
}

export interface GraphPathResult {
    from: string;
    to: string;
    found: boolean;
    meetsInMiddle: boolean;
    hops: GraphHop[];
    note: string;
}

export const GraphNodeRequest = new RequestType<GraphParams, GraphNodeResult | GraphNodeMiss | GraphFolderResult, void>('codeloupe/graph');
export const GraphPathRequest = new RequestType<GraphParams, GraphPathResult, void>('codeloupe/graph');

/** Result of `workspace/executeCommand` `codeloupe.reindex`. */
export interface ReindexResult {
    files: number;
    chunks: number;
}

/** The message a webview page posts to open a file: our pages send `uri` + `range`; the engine's graph page
 * may send a workspace-relative `path` and a 1-based `line` instead. */
export interface OpenMessage {
    type: 'open';
    uri?: string;
    path?: string;
    range?: Range;
    /** 0-based line inside `range` for the cursor (the match), when not its first line. */
    anchor?: number;
    line?: number;
}

export function isOpenMessage(value: unknown): value is OpenMessage {
    if (typeof value !== 'object' || value === null) {
        return false;
    }
    const message = value as Record<string, unknown>;
    return message.type === 'open' && (typeof message.uri === 'string' || typeof message.path === 'string');
}

/** A page asks for everything posted to it so far (it has just loaded, or found a message missing). */
export function isReplayMessage(value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<string, unknown>).type === 'replay';
}

/** An answer tab a reloaded window brought back (interrupted, failed) asks its question again: its button. */
export function isAskAgainMessage(value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<string, unknown>).type === 'askAgain';
}

/** A page's Refresh button was clicked (the status tab: ask the server again). */
export function isRefreshMessage(value: unknown): boolean {
    return typeof value === 'object' && value !== null && (value as Record<string, unknown>).type === 'refresh';
}
