// @pulsebase/client: the device SDK. Each part is its own factory, so a
// bundler keeps only what an app imports (identity + analytics stay small;
// realtime is its own factory too).
export { createClient, type ClientOptions, type DeviceInfo, type Identity, type PulsebaseClient, type UserUpdate } from "./client.js";
export {
  createAnalytics, type Analytics, type AnalyticsOptions, type AnalyticsStats, type CaptureOptions, type Kind, type LogInput,
} from "./analytics.js";
export { captureCrashes } from "./crash.js";
export {
  createDatabase, type Database, type DbResponse, type DbResult, type SqlParams, type SqlValue, type Statement,
} from "./database.js";
export { createFunctions, type FunctionCall, type Functions } from "./functions.js";
export {
  CmsQuery, createCms, type Cms, type CmsOptions, type ContentTypeSchema, type ContentTypeSummary, type EntryBase,
  type FilterOperator, type Page, type PageMeta, type SortSpec,
} from "./cms.js";
export {
  CmsError, isRetryable, NetworkError, PlatformError, PulsebaseError, StatementError, ValidationError,
  type CmsErrorCode, type PlatformErrorCode,
} from "./errors.js";
export {
  createRealtime, realtimeError, type BroadcastMessage, type Channel, type ChangeSubscription, type PresenceEvent, type PresenceMember,
  type CmsChange, type Realtime, type RealtimeChange, type RealtimeOptions, type RealtimeStatus, type RealtimeStatusEvent, type TableFilter, type Welcome,
  type WebSocketConstructor, type WebSocketLike,
} from "./realtime.js";
export { backoff, type FetchLike, type HttpResponse, type RequestOptions } from "./http.js";
export {
  defaultStorage, indexedDbStorage, memoryStorage, reactNativeStorage, webStorage, type KeyValueStore, type StorageAdapter,
} from "./storage.js";
