// Operations: to be built (stub so that pages/index.ts is final).

import type { PageDef } from "../page";
import { Empty, PageHeader } from "../ui";

function Operations() {
  return (
    <>
      <PageHeader title="Operations" />
      <Empty>Not built yet.</Empty>
    </>
  );
}

const pages: PageDef[] = [{ path: "/operations", name: "operations", title: "Operations", nav: "Operations", order: 4, component: Operations }];
export default pages;
