/** Runs tasks with at most `limit` at once; acquire() waits for a slot. */
export class Semaphore {
  private active = 0;
  private waiters: Array<() => void> = [];
  private idleWaiters: Array<() => void> = [];
  constructor(private readonly limit: number) {}
  async acquire(): Promise<void> {
    if (this.active < this.limit) {
      this.active++;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }
  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else {
      this.active--;
      if (this.active === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
  }
  get inUse(): number {
    return this.active;
  }
  async idle(): Promise<void> {
    if (this.active === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }
}
