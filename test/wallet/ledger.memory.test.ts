import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { ledgerContract } from "./ledger.contract.ts"

ledgerContract("memory", () => MemoryStore.layer)
