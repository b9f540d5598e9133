<?php
// Runs emoncms's own PHPFina engine (unchanged) on a directory of feed files; argv: dir id start end interval average timezone skipmissing limitinterval
define('EMONCMS_EXEC', 1);
class EmonLogger { function __construct($f){} function info($m){} function warn($m){} function error($m){} }
require getenv("EMONCMS_DIR") . "/Modules/feed/engine/PHPFina.php";
$e = new PHPFina(array('datadir'=>$argv[1]."/"));
$interval = is_numeric($argv[5]) ? (int)$argv[5] : $argv[5];
$data = $e->get_data_combined((int)$argv[2], (int)$argv[3], (int)$argv[4], $interval, (int)$argv[6], $argv[7], "unix", false, (int)$argv[8], (int)$argv[9]);
echo json_encode($data);
