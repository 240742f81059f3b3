// Nodes: to be built (stub so that pages/index.ts is final).

import type { PageDef } from "../page";
import { Empty, PageHeader } from "../ui";

function Nodes() {
  return (
    <>
      <PageHeader title="Nodes" />
      <Empty>Not built yet.</Empty>
    </>
  );
}

const pages: PageDef[] = [{ path: "/nodes", name: "nodes", title: "Nodes", nav: "Nodes", order: 1, component: Nodes }];
export default pages;
