// Audit: to be built (stub so that pages/index.ts is final).

import type { PageDef } from "../page";
import { Empty, PageHeader } from "../ui";

function Audit() {
  return (
    <>
      <PageHeader title="Audit" />
      <Empty>Not built yet.</Empty>
    </>
  );
}

const pages: PageDef[] = [{ path: "/audit", name: "audit", title: "Audit", nav: "Audit", order: 6, component: Audit }];
export default pages;
