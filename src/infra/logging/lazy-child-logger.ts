// Fastify makes a child logger (with the request id bound) for every request.
// The public listener logs for a request only when something fails, so the
// pino child is made on the first log call instead: on the device API's hot
// path a pino child per request costs more than the route's own JSON work.
import type { FastifyBaseLogger } from "fastify";
import type { Bindings, ChildLoggerOptions, Logger } from "pino";

class LazyChildLogger {
  private made: Logger | undefined;
  constructor(private readonly parent: Logger, private readonly bindings: Bindings, private readonly opts: ChildLoggerOptions) {}

  private get real(): Logger {
    return (this.made ??= this.parent.child(this.bindings, this.opts));
  }

  get level(): string {
    return this.made ? this.made.level : (this.opts.level ?? this.parent.level);
  }
  set level(l: string) {
    this.real.level = l;
  }
  fatal(...a: unknown[]): void {
    (this.real.fatal as (...x: unknown[]) => void)(...a);
  }
  error(...a: unknown[]): void {
    (this.real.error as (...x: unknown[]) => void)(...a);
  }
  warn(...a: unknown[]): void {
    (this.real.warn as (...x: unknown[]) => void)(...a);
  }
  info(...a: unknown[]): void {
    (this.real.info as (...x: unknown[]) => void)(...a);
  }
  debug(...a: unknown[]): void {
    (this.real.debug as (...x: unknown[]) => void)(...a);
  }
  trace(...a: unknown[]): void {
    (this.real.trace as (...x: unknown[]) => void)(...a);
  }
  silent(): void {}
  child(bindings: Bindings, opts?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real.child(bindings, opts) as unknown as FastifyBaseLogger;
  }
  isLevelEnabled(level: string): boolean {
    return this.made ? this.made.isLevelEnabled(level) : this.parent.isLevelEnabled(level);
  }
}

/** A Fastify `childLoggerFactory`: the request's pino child, made when first used. */
export function lazyChildLogger(logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyChildLogger(logger as unknown as Logger, bindings, opts) as unknown as FastifyBaseLogger;
}
