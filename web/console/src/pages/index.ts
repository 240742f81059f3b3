// Every page of the console. Adding a page is one file under pages/ and
// one line here.

import type { PageDef } from "../page";
import audit from "./audit";
import configuration from "./configuration";
import events from "./events";
import fleet from "./fleet";
import jobs from "./jobs";
import nodes from "./nodes";
import operations from "./operations";
import rollouts from "./rollouts";
import streams from "./streams";

export const pages: PageDef[] = [...fleet, ...nodes, ...streams, ...jobs, ...operations, ...events, ...audit, ...rollouts, ...configuration];
