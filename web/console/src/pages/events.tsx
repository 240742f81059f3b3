// Events: to be built (stub so that pages/index.ts is final).

import type { PageDef } from "../page";
import { Empty, PageHeader } from "../ui";

function Events() {
  return (
    <>
      <PageHeader title="Events" />
      <Empty>Not built yet.</Empty>
    </>
  );
}

const pages: PageDef[] = [{ path: "/events", name: "events", title: "Events", nav: "Events", order: 5, component: Events }];
export default pages;
