// Streams: to be built (stub so that pages/index.ts is final).

import type { PageDef } from "../page";
import { Empty, PageHeader } from "../ui";

function Streams() {
  return (
    <>
      <PageHeader title="Streams" />
      <Empty>Not built yet.</Empty>
    </>
  );
}

const pages: PageDef[] = [{ path: "/streams", name: "streams", title: "Streams", nav: "Streams", order: 2, component: Streams }];
export default pages;
