import { describe, expect, it } from "vitest"
import { planAgentChange } from "../../src/agents/owners.ts"
import type { Agent } from "../../src/domain/Agent.ts"
import type { AccountId, AgentId } from "../../src/domain/ids.ts"

/** The last-live-owner rule, as the stores apply it under the account's lock. */

const agent = (role: Agent["role"], killed = false): Agent => ({
  id: "agt_1" as AgentId,
  accountId: "acc_1" as AccountId,
  name: "ops",
  role,
  killed,
  killReason: killed ? "owner" : null,
  createdAt: new Date(0),
  lastActiveAt: null,
  deletedAt: null
})

describe("the last-live-owner rule", () => {
  it("refuses to kill the account's last live owner", () => {
    expect(planAgentChange({ agent: agent("owner"), otherLiveOwner: false }, { killed: true })).toEqual({ _tag: "LastLiveOwner" })
    // Even when the same change also renames: nothing is written.
    expect(planAgentChange({ agent: agent("owner"), otherLiveOwner: false }, { killed: true, name: "x" })).toEqual({ _tag: "LastLiveOwner" })
  })

  it("kills an owner while another live owner remains", () => {
    const plan = planAgentChange({ agent: agent("owner"), otherLiveOwner: true }, { killed: true })
    expect(plan).toMatchObject({ _tag: "Update", agent: { killed: true, role: "owner", name: "ops" } })
  })

  it("kills and revives non-owners whatever the owners' state", () => {
    expect(planAgentChange({ agent: agent("agent"), otherLiveOwner: false }, { killed: true }))
      .toMatchObject({ _tag: "Update", agent: { killed: true } })
    expect(planAgentChange({ agent: agent("agent", true), otherLiveOwner: false }, { killed: false }))
      .toMatchObject({ _tag: "Update", agent: { killed: false } })
  })

  it("renames or re-kills the last owner without refusing (nothing live is lost)", () => {
    expect(planAgentChange({ agent: agent("owner"), otherLiveOwner: false }, { name: "renamed" }))
      .toMatchObject({ _tag: "Update", agent: { name: "renamed", killed: false } })
    // An owner already killed (another owner lives on) may be "killed" again: no live owner is lost.
    expect(planAgentChange({ agent: agent("owner", true), otherLiveOwner: false }, { killed: true }))
      .toMatchObject({ _tag: "Update", agent: { killed: true } })
    expect(planAgentChange({ agent: agent("owner", true), otherLiveOwner: false }, { killed: false }))
      .toMatchObject({ _tag: "Update", agent: { killed: false } })
  })

  it("changes only what is given", () => {
    const plan = planAgentChange({ agent: agent("agent"), otherLiveOwner: true }, {})
    expect(plan).toEqual({ _tag: "Update", agent: agent("agent") })
  })
})
