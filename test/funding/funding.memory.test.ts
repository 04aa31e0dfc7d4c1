import * as MemoryStore from "../../adapters/memory/MemoryStore.ts"
import { fundingContract } from "./funding.contract.ts"

fundingContract("memory", () => MemoryStore.layer)
