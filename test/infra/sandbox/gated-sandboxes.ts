// Shared by the isolate pool tests (isolate-sharing, redteam-isolate-share):
// sandboxes with one host capability, ctx.gate.hold(tag), a call the test
// answers when it wants (a run waiting on a fetch, as far as the pool can
// tell), held in arrival order with its app; and the sandboxes a test opened,
// closed together.
import { createSandbox, type Sandbox } from "../../../src/infra/sandbox/sandbox.js";
import type { HostCapability } from "../../../src/kernel/host-capability.js";
import type { SandboxLimits } from "../../../src/infra/sandbox/types.js";

export interface HeldCall {
  appId: number;
  tag: unknown;
  /** Answers the call (true). */
  open: () => void;
}

export function gatedSandboxes() {
  const held: HeldCall[] = [];
  const gate: HostCapability = {
    name: "gate",
    busyCode: "unavailable",
    failureCode: "internal_error",
    methods: {
      hold(call, tag) {
        return new Promise((resolve) => held.push({ appId: call.appId, tag, open: () => resolve(true) }));
      },
    },
  };
  let open: Sandbox[] = [];
  return {
    /** The calls held so far (take them out with splice to answer them). */
    held,
    /** A sandbox with the gate and `limits`, closed by closeAll(). */
    sandbox(limits: Partial<SandboxLimits>): Sandbox {
      const s = createSandbox({ capabilities: [gate], limits });
      open.push(s);
      return s;
    },
    closeAll(): void {
      for (const s of open) s.close();
      open = [];
    },
  };
}
