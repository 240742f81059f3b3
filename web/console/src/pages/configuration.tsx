// Configuration: to be built (stub so that pages/index.ts is final).

import type { PageDef } from "../page";
import { Empty, PageHeader } from "../ui";

function Configuration() {
  return (
    <>
      <PageHeader title="Configuration" />
      <Empty>Not built yet.</Empty>
    </>
  );
}

const pages: PageDef[] = [{ path: "/configuration", name: "configuration", title: "Configuration", nav: "Configuration", order: 8, component: Configuration }];
export default pages;
