// Planted for packaging.no_detail_outside_detects: both lines must be reported.
namespace dd = disttrain::detail;
int x = disttrain::detail::internal_helper();
