import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { refundContract } from "./refund.contract.ts"

refundContract("memory", () => MemoryStore.layer)
