// Jobs: to be built (stub so that pages/index.ts is final).

import type { PageDef } from "../page";
import { Empty, PageHeader } from "../ui";

function Jobs() {
  return (
    <>
      <PageHeader title="Jobs" />
      <Empty>Not built yet.</Empty>
    </>
  );
}

const pages: PageDef[] = [{ path: "/jobs", name: "jobs", title: "Jobs", nav: "Jobs", order: 3, component: Jobs }];
export default pages;
